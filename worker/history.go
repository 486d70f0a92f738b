package worker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// WriterID is the writer id a worker named name records in session/writer
// for the lease with that epoch: "NAME/lease-EPOCH".
func WriterID(name string, epoch uint64) string {
	return name + "/lease-" + strconv.FormatUint(epoch, 10)
}

// ParseWriterID splits a worker's writer id into its worker's name and its
// lease's epoch; ok is false for an id no worker writes.
func ParseWriterID(id string) (name string, epoch uint64, ok bool) {
	i := strings.LastIndex(id, "/lease-")
	if i < 0 {
		return "", 0, false
	}
	epoch, err := strconv.ParseUint(id[i+len("/lease-"):], 10, 64)
	if err != nil || epoch == 0 {
		return "", 0, false
	}
	return id[:i], epoch, true
}

// Span is one writer's stretch of a session's log: from its session/writer
// event (From) to the event before the next writer's (To).
type Span struct {
	Writer   string
	Worker   string // the worker's name, for a worker's writer
	Epoch    uint64 // the lease's epoch, for a worker's writer
	From, To uint64
}

// CheckWriters reads a session's single-writer history from its log and
// returns its spans. It fails, naming the seq, if the log shows two
// writers at once: a writer whose span opens twice (it went on after
// another writer's first event), worker epochs that do not increase along
// the log (a lease holder wrote after a later lease began), or a tool/call
// that names a writer other than the one whose span it is in.
func CheckWriters(evs []store.Event) ([]Span, error) {
	var spans []Span
	opened := map[string]uint64{}
	var lastEpoch uint64
	for _, e := range evs {
		if n := len(spans); n > 0 {
			spans[n-1].To = e.Seq
		}
		switch e.Type {
		case event.EvSessionWriter:
			var w event.SessionWriter
			if err := json.Unmarshal(e.Data, &w); err != nil {
				return spans, fmt.Errorf("seq %d: session/writer: %v", e.Seq, err)
			}
			if at, ok := opened[w.ID]; ok {
				return spans, fmt.Errorf("seq %d: writer %s opens a second span (its first began at seq %d): two writers overlapped", e.Seq, w.ID, at)
			}
			opened[w.ID] = e.Seq
			s := Span{Writer: w.ID, From: e.Seq, To: e.Seq}
			if name, epoch, ok := ParseWriterID(w.ID); ok {
				if epoch <= lastEpoch {
					return spans, fmt.Errorf("seq %d: writer %s has lease epoch %d after epoch %d: a lease holder wrote after a later lease began", e.Seq, w.ID, epoch, lastEpoch)
				}
				s.Worker, s.Epoch, lastEpoch = name, epoch, epoch
			}
			spans = append(spans, s)
		case event.EvToolCall:
			var c event.ToolCallEvent
			if err := json.Unmarshal(e.Data, &c); err != nil {
				return spans, fmt.Errorf("seq %d: tool/call: %v", e.Seq, err)
			}
			cur := ""
			if n := len(spans); n > 0 {
				cur = spans[n-1].Writer
			}
			if c.Writer != cur {
				return spans, fmt.Errorf("seq %d: tool/call %s names writer %q inside the span of %q", e.Seq, c.CallID, c.Writer, cur)
			}
		}
	}
	return spans, nil
}
