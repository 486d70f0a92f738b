package term

import (
	"io"
	"time"

	"github.com/wagent/wagent/render"
)

// Palette is the CLI's colours (render's: the log and the live view use
// the same), used only when standard output is a terminal.
type Palette = render.Palette

// Colours is the palette when on, else none.
func Colours(on bool) Palette { return render.Colours(on) }

// Progress shows which module is loading while a pipeline builds, on a
// terminal only, and clears the line afterwards (an app.Progress).
type Progress struct {
	env   *Env
	shown bool
}

// NewProgress returns a Progress writing to env's standard error.
func NewProgress(env *Env) *Progress { return &Progress{env: env} }

func (p *Progress) Loading(use string) {
	if !IsTerminal(p.env.Stderr) {
		return
	}
	render.Fprintf(p.env.Stderr, "\r\x1b[2Kloading %s (the first run compiles it; later runs load it from the cache)", use)
	p.shown = true
}

func (p *Progress) Done() {
	if p.shown {
		render.Fprint(p.env.Stderr, render.ClearLine)
	}
}

// Spinner shows that something is happening while the model has not said
// anything yet. It runs only when standard error is a terminal; a nil
// Spinner does nothing.
type Spinner struct {
	w     io.Writer
	every time.Duration
	stop  chan struct{}
	done  chan struct{}
}

// NewSpinner returns a Spinner drawing on w, a frame each every.
func NewSpinner(w io.Writer, every time.Duration) *Spinner { return &Spinner{w: w, every: every} }

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Start shows label with a turning frame until Halt; starting a running
// spinner does nothing.
func (s *Spinner) Start(label string) {
	if s == nil || s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(s.every)
		defer t.Stop()
		for i := 0; ; i++ {
			render.Fprintf(s.w, "\r\x1b[2K%s %s", spinFrames[i%len(spinFrames)], label)
			select {
			case <-stop:
				render.Fprint(s.w, render.ClearLine)
				return
			case <-t.C:
			}
		}
	}(s.stop, s.done)
}

// Halt clears the spinner's line and returns once it is gone.
func (s *Spinner) Halt() {
	if s == nil || s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop, s.done = nil, nil
}
