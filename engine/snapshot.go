package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

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
	data, err := event.EncodeSnapshot(m.st, evs[0])
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
				if _, ok := event.MessageOf(e); ok && len(m.stubSeqs) < s.Stubbed {
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
	return event.MessageOf(evs[0])
}

func (m *Machine) warn(format string, args ...any) {
	if m.cfg.Warn != nil {
		m.cfg.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
}
