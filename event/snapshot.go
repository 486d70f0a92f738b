package event

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Snapshots of the fold. A machine that opens a session whose store keeps
// snapshots (store.Snapshots) starts from the newest one (OpenSnapshot)
// and folds only the events after it. A snapshot is never trusted: it is used only when it
// was written by this fold (FoldDigest), its bytes are intact (a
// checksum), its seq is not past the log's head, and the event at its seq
// is the one it was taken after (a digest of that event), so a snapshot
// from before a restore, from another fold version or damaged is ignored,
// with a warning, and a new one is taken later. Snapshots are taken in the
// driver's maintenance phase (see engine.Config.SnapshotEvery), never on
// the hot path.
//
// They stay small because the fold itself does not keep what a compaction
// summarised: those messages become stubs whose text stays in the log and
// is read back on demand (an op reading an old message), so a snapshot
// holds the conversation since the latest summary, the notes, the inbox
// and the open turn.

// foldVersion names the fold's meaning; change it whenever Apply reads the
// same events differently. FoldDigest adds the shape of State to it, so a
// change of the state's fields invalidates old snapshots by itself.
//
// fold/2: a compaction's usage counts in State.Usage, and a summary
// request's request/header is not a step's.
// fold/3: an answer without keys after one with them is refused.
const foldVersion = "fold/3"

// FoldDigest identifies this fold: snapshots written by another are
// ignored.
var FoldDigest = func() string {
	h := sha256.New()
	h.Write([]byte(foldVersion))
	writeShape(h, reflect.TypeOf(State{}), map[reflect.Type]bool{})
	return hex.EncodeToString(h.Sum(nil))[:16]
}()

func writeShape(w interface{ Write([]byte) (int, error) }, t reflect.Type, seen map[reflect.Type]bool) {
	fmt.Fprintf(w, "%s:", t.Kind())
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		writeShape(w, t.Elem(), seen)
	case reflect.Map:
		writeShape(w, t.Key(), seen)
		writeShape(w, t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			fmt.Fprintf(w, "%s;", t.Name())
			return
		}
		seen[t] = true
		fmt.Fprintf(w, "%s{", t.String())
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			fmt.Fprintf(w, "%s %s ", f.Name, f.Tag)
			writeShape(w, f.Type, seen)
		}
		fmt.Fprint(w, "}")
	}
}

// snapFile is a stored snapshot.
type snapFile struct {
	Fold string `json:"fold"`
	Seq  uint64 `json:"seq"`
	// Event is the digest of the event at Seq, as the log stores it.
	Event string `json:"event"`
	// Sum is the digest of State.
	Sum   string          `json:"sum"`
	State json.RawMessage `json:"state"`
}

// snapState is what a snapshot keeps of a State: all of it (the fold
// keeps only the messages after the latest summary), and the ids used.
type snapState struct {
	*State
	// IDs are the inbox message ids ever used, sorted, one per line: one
	// string decodes much faster than thousands.
	IDs string `json:"ids"`
}

func eventDigest(e store.Event) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d\x00%s\x00", e.Seq, e.Type, e.Turn, e.Step, e.Time.UTC().Format("2006-01-02T15:04:05.999999999Z"))
	h.Write(e.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// EncodeSnapshot encodes st, the fold through event last (st.Head ==
// last.Seq), as a snapshot.
func EncodeSnapshot(st *State, last store.Event) ([]byte, error) {
	if last.Seq != st.Head {
		return nil, fmt.Errorf("event: snapshot of seq %d with the event of seq %d", st.Head, last.Seq)
	}
	ss := snapState{State: st}
	ss.IDs = strings.Join(st.UsedIDs(), "\n")
	body, err := json.Marshal(ss)
	if err != nil {
		return nil, fmt.Errorf("event: encode snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	return json.Marshal(snapFile{Fold: FoldDigest, Seq: st.Head, Event: eventDigest(last), Sum: hex.EncodeToString(sum[:]), State: body})
}

// ErrSnapshot is wrapped by the reasons a snapshot is not used.
var ErrSnapshot = errors.New("event: snapshot not used")

// DecodeSnapshot checks a stored snapshot against its own checksum and
// the fold version, and returns its state; the caller checks it against
// the log (DecodeSnapshot cannot).
func DecodeSnapshot(session string, data []byte) (*State, string, error) {
	var f snapFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, "", fmt.Errorf("%w: it is damaged: %v", ErrSnapshot, err)
	}
	if f.Fold != FoldDigest {
		return nil, "", fmt.Errorf("%w: it was written by another fold version (%s, this is %s)", ErrSnapshot, f.Fold, FoldDigest)
	}
	sum := sha256.Sum256(f.State)
	if hex.EncodeToString(sum[:]) != f.Sum {
		return nil, "", fmt.Errorf("%w: its checksum does not match: it is damaged", ErrSnapshot)
	}
	st := NewState(session)
	ss := snapState{State: st}
	dec := json.NewDecoder(bytes.NewReader(f.State))
	if err := dec.Decode(&ss); err != nil {
		return nil, "", fmt.Errorf("%w: it is damaged: %v", ErrSnapshot, err)
	}
	if st.Session != session || st.Head != f.Seq || st.Stubbed < 0 || len(st.Messages) != len(st.MessageSeqs) {
		return nil, "", fmt.Errorf("%w: it does not describe session %s through seq %d", ErrSnapshot, session, f.Seq)
	}
	if ss.IDs != "" {
		for _, id := range strings.Split(ss.IDs, "\n") {
			st.ids[id] = struct{}{}
		}
	}
	if st.Notes == nil {
		st.Notes = map[string]map[string]string{}
	}
	if st.TurnFaults == nil {
		st.TurnFaults = map[string]int{}
	}
	return st, f.Event, nil
}

// OpenSnapshot returns the state of the newest usable snapshot of the
// session, or nil (with why, when there was one and it was not used: an
// error wrapping ErrSnapshot).
func OpenSnapshot(ctx context.Context, log store.Log, sn store.Snapshots, session string) (*State, error) {
	seq, data, err := sn.Snapshot(ctx, session)
	if err != nil || data == nil {
		return nil, err
	}
	st, event, err := DecodeSnapshot(session, data)
	if err != nil {
		return nil, err
	}
	head, err := log.Head(ctx, session)
	if err != nil {
		return nil, err
	}
	if seq > head {
		return nil, fmt.Errorf("%w: it is of seq %d, past the log's head %d (a restored store?)", ErrSnapshot, seq, head)
	}
	evs, err := log.Read(ctx, session, seq, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) != 1 || eventDigest(evs[0]) != event {
		return nil, fmt.Errorf("%w: the log's event at seq %d is not the one it was taken after (a restored store?)", ErrSnapshot, seq)
	}
	return st, nil
}

// MessageOf is the conversation message an event adds, if it adds one (a
// user message that is not a command, an answer, a tool result).
func MessageOf(e store.Event) (hostabi.Message, bool) {
	switch e.Type {
	case EvUserMessage:
		var d UserMessage
		if json.Unmarshal(e.Data, &d) != nil || d.Command != "" {
			return hostabi.Message{}, false
		}
		return hostabi.Message{Role: "user", ID: d.ID, Content: d.Content}, true
	case EvAssistantMessage:
		var d AssistantMessage
		if json.Unmarshal(e.Data, &d) != nil {
			return hostabi.Message{}, false
		}
		return hostabi.Message{Role: "assistant", Content: d.Content, ToolCalls: d.ToolCalls}, true
	case EvToolResult:
		var d ToolResult
		if json.Unmarshal(e.Data, &d) != nil {
			return hostabi.Message{}, false
		}
		return hostabi.Message{Role: "tool", CallID: d.CallID, Content: d.Content, IsError: d.IsError}, true
	}
	return hostabi.Message{}, false
}
