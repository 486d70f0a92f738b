package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

// Attack 5c: random interleavings of every verb from several goroutines on
// one session. The log folds; nothing acknowledged is lost; a CancelInput
// that says it cancelled turn T did, and T had claimed its input; one that
// says it withdrew the input did, with its cause; after Close no goroutine
// of the session is left.
func TestAttack5HammerVerbs(t *testing.T) {
	base := runtime.NumGoroutine()
	p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" && strings.HasPrefix(last.Content, "tool") {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}}
		}
		return et.Reply{Text: "ok"}
	}}
	h := newHarness(t, p, et.Approver(nil, nil), et.Calculator())
	s := h.sess
	ctx := context.Background()
	var mu sync.Mutex
	var ids []string
	results := map[string]engine.InputCanceled{}
	const workers, ops = 5, 80
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := range ops {
				var id string
				var err error
				text := fmt.Sprintf("%d-%d", w, i)
				if r.Intn(2) == 0 {
					text = "tool " + text
				}
				op := r.Intn(9)
				switch op {
				case 0, 1:
					id, err = s.Send(ctx, text)
				case 2:
					id, err = s.Steer(ctx, text)
				case 3:
					id, err = s.Inject(ctx, text)
				case 4:
					_, err = s.Cancel(ctx, event.Cause{Kind: event.CauseUser, By: "cancel"}, r.Intn(2) == 0)
				case 5, 6:
					mu.Lock()
					var victim string
					if len(ids) > 0 {
						victim = ids[r.Intn(len(ids))]
					}
					_, done := results[victim]
					mu.Unlock()
					if victim == "" || done {
						continue
					}
					got, cerr := s.CancelInput(ctx, victim, event.Cause{Kind: event.CauseUser, By: victim})
					err = cerr
					if cerr == nil {
						mu.Lock()
						results[victim] = got
						mu.Unlock()
					}
				case 7:
					var ds []engine.Decision
					for _, c := range s.Waiting() {
						ds = append(ds, engine.Decision{CallID: c.ID, Allow: r.Intn(2) == 0, Who: "someone"})
					}
					if len(ds) > 0 {
						err = s.Decide(ctx, ds...)
						if errors.Is(err, engine.ErrDecided) || errors.Is(err, engine.ErrRefused) {
							err = nil
						}
					}
				case 8:
					s.Wake()
				}
				if err != nil && !errors.Is(err, session.ErrBusy) {
					t.Errorf("worker %d op %d (kind %d): %v", w, i, op, err)
				}
				if id != "" {
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	s.Wake()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.WhenIdle(wctx); err != nil {
		t.Fatal(err)
	}
	evs := h.events() // folds
	st, _ := event.Fold("s", evs)
	checkNoLostInput(t, "s", evs, st)
	// Which turn claimed each id, and which were withdrawn with a cause.
	claimedIn := map[string]map[int]bool{}
	withdrawnBy := map[string]string{}
	lists := map[string][]string{}
	ends := map[int]int{}
	endOf := map[int]event.TurnEnd{}
	for _, e := range evs {
		switch e.Type {
		case event.EvTurnEnd:
			var te event.TurnEnd
			mustDecode(t, e, &te)
			ends[te.Turn]++
			endOf[te.Turn] = te
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			mustDecode(t, e, &d)
			l := lists[d.List]
			removed := append([]string(nil), l[d.Start:d.Start+d.Removed]...)
			var ins []string
			for _, m := range d.Inserted {
				ins = append(ins, m.ID)
			}
			lists[d.List] = append(append(append([]string(nil), l[:d.Start]...), ins...), l[d.Start+d.Removed:]...)
			for _, id := range removed {
				switch {
				case d.Outcome == event.OutcomeClaimed:
					if claimedIn[id] == nil {
						claimedIn[id] = map[int]bool{}
					}
					claimedIn[id][e.Turn] = true
				case d.Outcome == event.OutcomeCanceled && d.Cause != nil:
					withdrawnBy[id] = d.Cause.By
				}
			}
		}
	}
	t.Logf("%d inputs, %d turns, %d cancel-inputs", len(ids), len(ends), len(results))
	for turn, n := range ends {
		if n != 1 {
			t.Errorf("turn %d has %d turn/ends", turn, n)
		}
	}
	admitted := admittedIn(t, evs)
	for id, got := range results {
		switch {
		case got.Withdrawn:
			if withdrawnBy[id] != id || admitted[id] != 0 {
				t.Errorf("CancelInput(%s) = %+v; withdrawn by %q, admitted in turn %d", id, got, withdrawnBy[id], admitted[id])
			}
		case got.Turn != 0:
			if !claimedIn[id][got.Turn] && admitted[id] != got.Turn {
				t.Errorf("CancelInput(%s) = %+v cancelled turn %d, which its input did not enter (claimed in %v, admitted in %d)", id, got, got.Turn, claimedIn[id], admitted[id])
			}
			if te, ok := endOf[got.Turn]; got.Recorded && (!ok || te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.By != id) {
				t.Errorf("CancelInput(%s) = %+v; turn %d ended %+v", id, got, got.Turn, te)
			}
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Goroutines end without an event to wait on: the count is polled,
	// with a deadline, until it settles.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
