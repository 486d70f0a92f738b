package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wagent/wagent/store"
)

func testConcurrentAppendConflict(t *testing.T, l store.Log) {
	// Rounds of contenders that all append at the same expected head: in
	// each round exactly one wins and the others get ErrConflict.
	const rounds, contenders = 200, 4
	mustCreate(t, l, "s")
	var head uint64
	var want []store.Event
	for round := range rounds {
		start := make(chan struct{})
		errs := make([]error, contenders)
		batches := make([][]store.Event, contenders)
		var wg sync.WaitGroup
		for c := range contenders {
			batches[c] = evs(fmt.Sprintf("r%d/c%d", round, c), head+1, c+1, 0)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[c] = l.Append(ctx(t), "s", head, batches[c]...)
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for c, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: contenders %d and %d both appended at head %d", round, winner, c, head)
			case err == nil:
				winner = c
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("round %d: contender %d: got %v, want ErrConflict", round, c, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no contender appended at head %d: %v", round, head, errs)
		}
		want = append(want, withSeqs(head+1, batches[winner]...)...)
		head += uint64(len(batches[winner]))
		if got := mustHead(t, l, "s"); got != head {
			t.Fatalf("round %d: Head = %d, want %d (contender %d appended %d events)", round, got, head, winner, winner+1)
		}
	}
	checkEvents(t, "the log after the rounds", want, mustRead(t, l, "s", 1, 0))
}

func testConcurrentCreate(t *testing.T, l store.Log) {
	const rounds, contenders = 50, 4
	for round := range rounds {
		id := fmt.Sprintf("s%d", round)
		start := make(chan struct{})
		errs := make([]error, contenders)
		var wg sync.WaitGroup
		for c := range contenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[c] = l.Create(ctx(t), id)
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for c, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("round %d: contender %d: got %v, want ErrExists", round, c, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d contenders created %s, want exactly 1", round, wins, id)
		}
	}
}

func testParallelSessions(t *testing.T, l store.Log) {
	// Writers of different sessions never conflict with each other.
	const writers, appends = 8, 40
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w%d", w)
			if err := l.Create(ctx(t), id); err != nil {
				errs[w] = err
				return
			}
			var head uint64
			for i := range appends {
				h, err := l.Append(ctx(t), id, head, evs(id, head+1, i%3+1, 0)...)
				if err != nil {
					errs[w] = fmt.Errorf("append %d: %w", i, err)
					return
				}
				head = h
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", w, err)
		}
	}
	for w := range writers {
		id := fmt.Sprintf("w%d", w)
		var want []store.Event
		for i := range appends {
			want = append(want, evs(id, uint64(len(want))+1, i%3+1, 0)...)
		}
		checkEvents(t, "session "+id, withSeqs(1, want...), mustRead(t, l, id, 1, 0))
	}
}
