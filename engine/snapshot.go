package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Snapshots of the fold. A machine that opens a session whose store keeps
// snapshots (store.Snapshots) starts from the newest one and folds only the
// events after it. A snapshot is never trusted: it is used only when it
// was written by this fold (FoldDigest), its bytes are intact (a
// checksum), its seq is not past the log's head, and the event at its seq
// is the one it was taken after (a digest of that event), so a snapshot
// from before a restore, from another fold version or damaged is ignored,
// with a warning, and a new one is taken later. Snapshots are taken in the
// driver's maintenance phase (see Config.SnapshotEvery), never on the hot
// path.
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
		return nil, fmt.Errorf("engine: snapshot of seq %d with the event of seq %d", st.Head, last.Seq)
	}
	ss := snapState{State: st}
	ids := make([]string, 0, len(st.ids))
	for id := range st.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ss.IDs = strings.Join(ids, "\n")
	body, err := json.Marshal(ss)
	if err != nil {
		return nil, fmt.Errorf("engine: encode snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	return json.Marshal(snapFile{Fold: FoldDigest, Seq: st.Head, Event: eventDigest(last), Sum: hex.EncodeToString(sum[:]), State: body})
}

// ErrSnapshot is wrapped by the reasons a snapshot is not used.
var ErrSnapshot = errors.New("engine: snapshot not used")

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

// openSnapshot returns the state of the newest usable snapshot of the
// session, or nil (with why, when there was one and it was not used).
func openSnapshot(ctx context.Context, log store.Log, sn store.Snapshots, session string) (*State, error) {
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

// Snapshot stores a snapshot of the machine's state, if its store keeps
// them and the state changed since the last one. The driver calls it in
// its maintenance phase.
func (m *Machine) Snapshot(ctx context.Context) error {
	sn, ok := m.lg.Log.(store.Snapshots)
	if !ok || m.st.Head == 0 || m.st.Head == m.snapSeq {
		return nil
	}
	evs, err := m.lg.Log.Read(ctx, m.st.Session, m.st.Head, 1)
	if err != nil {
		return err
	}
	if len(evs) != 1 {
		return fmt.Errorf("engine: snapshot: no event at seq %d", m.st.Head)
	}
	data, err := EncodeSnapshot(m.st, evs[0])
	if err != nil {
		return err
	}
	if len(data) > store.MaxSnapshotBytes {
		m.warn("the fold of session %s is %d bytes, too large to snapshot; opening it folds the whole log", m.st.Session, len(data))
		m.snapSeq = m.st.Head
		return nil
	}
	if err := sn.PutSnapshot(ctx, m.st.Session, m.st.Head, data); err != nil {
		return err
	}
	m.snapSeq = m.st.Head
	return nil
}

// SnapshotDue reports whether enough was appended since the last snapshot
// to take another (Config.SnapshotEvery).
func (m *Machine) SnapshotDue() bool {
	if m.cfg.SnapshotEvery < 0 {
		return false
	}
	if _, ok := m.lg.Log.(store.Snapshots); !ok {
		return false
	}
	return m.st.Head-m.snapSeq >= uint64(m.cfg.SnapshotEvery)
}

// loadMessage reads message i, one a compaction summarised (its text left
// in the log), back from its event. The first time, it finds where each
// summarised message is by reading the log up to the summary's range.
func (m *Machine) loadMessage(i int) (hostabi.Message, bool) {
	s := m.st
	if i < 0 || i >= s.Stubbed || s.Compaction == nil {
		return hostabi.Message{}, false
	}
	ctx := context.Background()
	if len(m.stubSeqs) < s.Stubbed {
		m.stubSeqs = m.stubSeqs[:0]
		for from := uint64(1); from <= s.Compaction.ThroughSeq && len(m.stubSeqs) < s.Stubbed; {
			evs, err := m.lg.Log.Read(ctx, s.Session, from, 4096)
			if err != nil || len(evs) == 0 {
				return hostabi.Message{}, false
			}
			for _, e := range evs {
				if _, ok := messageOf(e); ok && len(m.stubSeqs) < s.Stubbed {
					m.stubSeqs = append(m.stubSeqs, e.Seq)
				}
				from = e.Seq + 1
			}
		}
		if len(m.stubSeqs) < s.Stubbed {
			return hostabi.Message{}, false
		}
	}
	evs, err := m.lg.Log.Read(ctx, s.Session, m.stubSeqs[i], 1)
	if err != nil || len(evs) != 1 {
		return hostabi.Message{}, false
	}
	return messageOf(evs[0])
}

// messageOf is the conversation message an event adds.
func messageOf(e store.Event) (hostabi.Message, bool) {
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

func (m *Machine) warn(format string, args ...any) {
	if m.cfg.Warn != nil {
		m.cfg.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
}
