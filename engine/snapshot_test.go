package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// randomLog runs a random session (tool turns, steering, compactions, an
// approval) and returns its log.
func randomLog(t *testing.T, seed uint64) []store.Event {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	window := 300 + rng.IntN(600)
	p := &sizedModel{window: window}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation {
			return []engine.Operation{et.Approver([]string{"calc_add"}, nil), compactor(window, false), et.Calculator(), et.Stopper("added", 1)}
		}}
	env.Create(t)
	for i := range 3 + rng.IntN(8) {
		env.Send(t, fmt.Sprintf("turn %d %s", i, strings.Repeat("w", rng.IntN(200))))
		if rng.IntN(3) == 0 {
			m := env.Open(t)
			m.Enqueue(context.Background(), event.ListNextStep, hostabi.InputMessage{Content: "steer " + fmt.Sprint(i)})
		}
		if o := env.RunRebuilding(t); o != engine.Idle {
			t.Fatalf("seed %d turn %d: outcome %v", seed, i, o)
		}
	}
	return env.Events(t)
}

var stateOpts = cmp.Options{
	cmp.AllowUnexported(event.State{}),
	cmpopts.EquateEmpty(),
}

// Folding from a snapshot taken at any point gives the state a fold from
// scratch gives.
func TestPropertySnapshotFoldEqualsFullFold(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		evs := randomLog(t, uint64(seed))
		full, err := event.Fold("s", evs)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		for range 5 {
			k := 1 + rng.IntN(len(evs))
			part, err := event.Fold("s", evs[:k])
			if err != nil {
				t.Fatal(err)
			}
			data, err := event.EncodeSnapshot(part, evs[k-1])
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := event.DecodeSnapshot("s", data)
			if err != nil {
				t.Fatalf("seed %d at %d: %v", seed, k, err)
			}
			for _, e := range evs[k:] {
				if err := st.Apply(e); err != nil {
					t.Fatalf("seed %d: folding on from the snapshot at %d: %v", seed, k, err)
				}
			}
			if diff := cmp.Diff(full, st, stateOpts); diff != "" {
				t.Fatalf("seed %d, snapshot at seq %d of %d: state mismatch (-from scratch +from the snapshot):\n%s", seed, k, len(evs), diff)
			}
		}
	}
}

// A session with snapshots, opened through the real entry point: a good
// snapshot is used; damaged bytes, another fold version and a snapshot
// past the log (a restored store) are each ignored with a warning, and
// the session opens as it is.
func TestSnapshotsAreCheckedNeverTrusted(t *testing.T) {
	evs := randomLog(t, 3)
	build := func(t *testing.T) (store.Log, store.Snapshots) {
		l := store.NewMemory()
		ctx := context.Background()
		l.Create(ctx, "s")
		if _, err := l.Append(ctx, "s", 0, evs...); err != nil {
			t.Fatal(err)
		}
		return l, l.(store.Snapshots)
	}
	full, _ := event.Fold("s", evs)
	good := func() []byte {
		part, _ := event.Fold("s", evs[:len(evs)-3])
		b, err := event.EncodeSnapshot(part, evs[len(evs)-4])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		seq  uint64
		data func() []byte
		warn string
	}{
		{"good", uint64(len(evs) - 3), good, ""},
		{"damaged bytes", uint64(len(evs) - 3), func() []byte { b := good(); b[len(b)/2] ^= 0x5a; return b }, "damaged"},
		{"truncated", uint64(len(evs) - 3), func() []byte { b := good(); return b[:len(b)/2] }, "damaged"},
		{"another fold version", uint64(len(evs) - 3), func() []byte {
			return []byte(strings.Replace(string(good()), event.FoldDigest, "0123456789abcdef", 1))
		}, "another fold version"},
		{"ahead of the log", uint64(len(evs) + 40), func() []byte {
			longer := append(append([]store.Event(nil), evs...), store.Event{Seq: uint64(len(evs) + 1), Type: event.EvOpNote, Time: et.Epoch, Data: []byte(`{"op":"x","key":"k","value":"v"}`)})
			part, _ := event.Fold("s", longer)
			b, _ := event.EncodeSnapshot(part, longer[len(longer)-1])
			return b
		}, "past the log's head"},
		{"of another history", uint64(len(evs) - 3), func() []byte {
			// The same seqs, but the event at the snapshot's seq differs.
			other := append([]store.Event(nil), evs[:len(evs)-3]...)
			other[len(other)-1].Time = other[len(other)-1].Time.Add(time.Second)
			part, _ := event.Fold("s", other)
			b, _ := event.EncodeSnapshot(part, other[len(other)-1])
			return b
		}, "not the one it was taken after"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, sn := build(t)
			if err := sn.PutSnapshot(context.Background(), "s", tc.seq, tc.data()); err != nil {
				t.Fatal(err)
			}
			var warned []string
			m, err := engine.Open(context.Background(), engine.Config{Log: l, Session: "s", Warn: func(s string) { warned = append(warned, s) }})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if diff := cmp.Diff(full, m.State(), stateOpts); diff != "" {
				t.Fatalf("the session did not open as its log says (-want +got):\n%s", diff)
			}
			switch {
			case tc.warn == "" && len(warned) > 0:
				t.Errorf("a good snapshot was refused: %v", warned)
			case tc.warn != "" && (len(warned) != 1 || !strings.Contains(warned[0], tc.warn)):
				t.Errorf("warnings %q, want one saying %q", warned, tc.warn)
			}
		})
	}
}

// The driver takes a snapshot after a drain once enough was appended, and
// a machine opened later starts from it; messages a compaction summarised
// are stubs in memory that an op still reads, from the log.
func TestSnapshotAfterDrainAndStubsReadBack(t *testing.T) {
	const window = 400
	log := store.NewMemory()
	p := &sizedModel{window: window}
	var read []string
	reader := &engine.OpFunc{M: &hostabi.Manifest{Name: "reader", Hooks: []hostabi.Hook{hostabi.HookTurnStopping}},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if m, ok := r.Message(0); ok {
				read = append(read, m.Content)
			}
			return nil, nil
		}}
	pl, _ := engine.NewPipeline(compactor(window, false), et.Calculator(), reader)
	if err := engine.Create(context.Background(), log, "s", event.SessionCreated{}, et.Epoch); err != nil {
		t.Fatal(err)
	}
	sess, err := session.OpenSession(context.Background(), engine.Config{Log: log, Session: "s", Pipeline: pl, Provider: p, SnapshotEvery: 20, Durability: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		sess.Send(context.Background(), fmt.Sprintf("first prompt %d %s", i, strings.Repeat("x", 100)))
		if err := sess.WhenIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sess.Close(context.Background())
	seq, data, _ := log.(store.Snapshots).Snapshot(context.Background(), "s")
	if seq == 0 || data == nil {
		t.Fatal("no snapshot was taken")
	}
	m, err := engine.Open(context.Background(), engine.Config{Log: log, Session: "s", Warn: func(s string) { t.Errorf("warned: %s", s) }})
	if err != nil {
		t.Fatal(err)
	}
	st := m.State()
	if st.Stubbed == 0 || len(st.Messages) != st.MessageCount()-st.Stubbed {
		t.Fatalf("stubbed %d, %d messages in memory of %d: compacted messages must not be kept in memory", st.Stubbed, len(st.Messages), st.MessageCount())
	}
	if len(read) == 0 || !strings.HasPrefix(read[len(read)-1], "first prompt 0") {
		t.Fatalf("the op read %q of message 0, want the first prompt read back from the log", read)
	}
}

var _ provider.Provider = (*sizedModel)(nil)
