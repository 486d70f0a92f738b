package jetstream

import (
	"context"
	"strconv"
	"strings"
	"sync"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// hub broadcasts a session's head to its watchers. It works like the one in
// package store, with one difference: heads arrive from two sources (this
// Log's own appends, at once, and every writer's, later, through the
// follower), so each notification carries the stream sequence of its record
// and a watcher drops any that is not newer than the last it was sent.
// Stream sequences only grow, across a Delete and a Create of the same id
// too, so no reset is needed and a late duplicate is never sent after a
// newer head.
//
// Each watcher owns a channel of capacity 1; a send replaces a head the
// reader has not taken, so nothing here ever waits for a reader.
type hub struct {
	mu      sync.Mutex
	closed  bool
	watches map[string]map[*watcher]struct{}
}

type watcher struct {
	ch   chan uint64
	last uint64 // stream sequence of the record of the last head sent
}

// watch registers a watcher of session. live is false when the hub is
// closed; the channel is then closed already.
func (h *hub) watch(session string) (ch <-chan uint64, stop func(), live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &watcher{ch: make(chan uint64, 1)}
	if h.closed {
		close(w.ch)
		return w.ch, func() {}, false
	}
	if h.watches == nil {
		h.watches = make(map[string]map[*watcher]struct{})
	}
	set := h.watches[session]
	if set == nil {
		set = make(map[*watcher]struct{})
		h.watches[session] = set
	}
	set[w] = struct{}{}
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		set := h.watches[session]
		if _, ok := set[w]; !ok {
			return // stopped already, or closed with the hub
		}
		delete(set, w)
		if len(set) == 0 {
			delete(h.watches, session)
		}
		w.shut()
	}, true
}

// shut drops a head the reader has not taken and closes the channel, so a
// stopped or closed watch reads as closed at once. The hub's mutex is held.
func (w *watcher) shut() {
	select {
	case <-w.ch:
	default:
	}
	close(w.ch)
}

// notify tells session's watchers that the record at stream sequence seq
// brought its head to head.
func (h *hub) notify(session string, seq, head uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[session] {
		if seq <= w.last {
			continue
		}
		w.last = seq
		select {
		case w.ch <- head:
		default:
			select {
			case <-w.ch: // replace the head the reader has not taken yet
			default:
			}
			w.ch <- head // cannot block: the only sender, and the buffer is empty
		}
	}
}

// close closes every watcher's channel; later watches get closed channels.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, set := range h.watches {
		for w := range set {
			w.shut()
		}
	}
	h.watches = nil
}

// follower feeds the hub with the appends of every writer on the stream:
// one ordered consumer, headers only, over all the store's subjects,
// starting at new messages. It runs while at least one watch is open.
//
// One consumer per Log, not one per watched session: a stream allows a
// limited number of consumers (1,000 by default in nats-server 2.15) and a
// server fronting many sessions watches many at once.
type follower struct {
	l *Log

	mu     sync.Mutex
	closed bool
	n      int // open watches
	cons   natsjs.Consumer
	cc     natsjs.ConsumeContext
}

// acquire counts a new watch and starts the consumer if it is not running.
func (f *follower) acquire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.n++
	if f.cc != nil {
		return
	}
	if err := f.start(); err != nil {
		f.l.log.Warn("store/jetstream: watch cannot follow other writers; it sees this process's appends only",
			"stream", f.l.opts.Stream, "err", err)
	}
}

// release counts a watch that stopped and stops the consumer after the
// last one.
func (f *follower) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.n == 0 {
		return
	}
	f.n--
	if f.n == 0 {
		f.stop()
	}
}

// close stops the consumer for good.
func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.stop()
}

// start creates the consumer and waits until it is consuming. It starts
// after the stream's last message as the stream leader counts it: "new
// messages" as a consumer on a lagging replica counts them could include
// appends that committed before the watch. f.mu is held.
func (f *follower) start() error {
	l := f.l
	var info *natsjs.StreamInfo
	err := l.reading(context.Background(), func() (err error) {
		ctx, cancel := l.request(context.Background())
		defer cancel()
		info, err = l.stream.Info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.Timeout)
	defer cancel()
	cons, err := l.stream.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{
		FilterSubjects: []string{l.prefix + "*"},
		DeliverPolicy:  natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:    info.State.LastSeq + 1,
		HeadersOnly:    true,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(f.handle)
	if err != nil {
		return err
	}
	f.cons, f.cc = cons, cc
	return nil
}

// stop stops the consumer and deletes it on the server. f.mu is held.
func (f *follower) stop() {
	if f.cc == nil {
		return
	}
	f.cc.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), f.l.opts.Timeout)
	defer cancel()
	_ = f.l.stream.DeleteConsumer(ctx, f.cons.CachedInfo().Name)
	f.cons, f.cc = nil, nil
}

// handle turns one record's headers into a notification. Anything that is
// not an append record of a session is not an append to announce.
func (f *follower) handle(m natsjs.Msg) {
	l := f.l
	id, ok := sessionOfToken(strings.TrimPrefix(m.Subject(), l.prefix))
	if !ok {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return
	}
	h := m.Headers()
	if h.Get(hdrFormat) != formatVersion {
		return
	}
	count, err1 := strconv.ParseUint(h.Get(hdrCount), 10, 64)
	head, err2 := strconv.ParseUint(h.Get(hdrHead), 10, 64)
	if err1 != nil || err2 != nil || count == 0 {
		return
	}
	l.hub.notify(id, md.Sequence.Stream, head)
}
