package session

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/wagent/wagent/event"
)

// Stopped says why a command's context was cancelled: a signal, or a
// standard output that was closed. It is the context's cause.
type Stopped struct {
	Cause event.Cause
	// quiet: exit without a message (the reader of our output is gone).
	Quiet bool
}

func (s *Stopped) Error() string { return s.Cause.Reason }

// SignalContext is cancelled on the first SIGINT, SIGTERM or SIGHUP, with
// a *Stopped cause saying which; SIGPIPE is caught too, so that a write
// to a closed standard output fails (see guardStdout) instead of killing
// the process with the turn open.
func SignalContext() (context.Context, context.CancelCauseFunc, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for {
			select {
			case sig := <-ch:
				switch sig {
				case syscall.SIGPIPE:
					continue // the failed write reports it
				case syscall.SIGTERM:
					cancel(&Stopped{Cause: event.Cause{Kind: event.CauseParent, Reason: "terminated (SIGTERM)"}})
				case syscall.SIGHUP:
					cancel(&Stopped{Cause: event.Cause{Kind: event.CauseParent, Reason: "the terminal hung up (SIGHUP)"}})
				default:
					cancel(&Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "interrupted at the terminal"}})
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, cancel, func() { signal.Stop(ch); cancel(nil) }
}

// StopCause returns why ctx was cancelled (a Ctrl-C when it does not say).
func StopCause(ctx context.Context) *Stopped {
	var s *Stopped
	if errors.As(context.Cause(ctx), &s) {
		return s
	}
	return &Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "interrupted"}}
}

// guardStdout wraps standard output so that the first failed write (the
// reader went away: `wagent run … | head -3`) cancels ctx, and the turn
// ends as it would on Ctrl-C, quietly.
type guardStdout struct {
	w      io.Writer
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	failed bool
}

func (g *guardStdout) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return 0, io.ErrClosedPipe
	}
	n, err := g.w.Write(p)
	if err != nil {
		g.failed = true
		g.cancel(&Stopped{Cause: event.Cause{Kind: event.CauseParent, Reason: "standard output was closed"}, Quiet: true})
	}
	return n, err
}

// WaitingError says the session waits for a decision: the command exits
// with the code that says so (3), after Msg when there is one.
type WaitingError struct{ Msg string }

func (e *WaitingError) Error() string { return e.Msg }
