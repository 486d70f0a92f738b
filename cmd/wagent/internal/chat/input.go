package chat

import (
	"bytes"
	"io"
	"regexp"
	"sync"
	"sync/atomic"
)

// promptInput is what a line editor reads: the terminal's bytes, and the
// interrupts (Ctrl-C, 0x03) injected to end an open prompt whose call was
// decided elsewhere. The editor cannot be told to stop reading otherwise.
// It counts the interrupts it injected, so an interrupt the editor returns
// is known to be the program's, not the person's.
//
// A decision names what was shown: keys that came before an approval
// prompt are not its answer. So what is typed ahead waits here, where
// the prompt drops it (fresh), never in the editor: a read gets at most
// one line (or one interrupt), and while the editor waits for the
// terminal's answer to its cursor-position query (which it asks before
// each prompt, keeping what else it reads meanwhile for later) it gets
// that answer alone.
type promptInput struct {
	mu      sync.Mutex
	ready   *sync.Cond
	queue   []inputChunk // read from the terminal (or injected), not yet given to the editor
	err     error        // the terminal's, after the queue
	cpr     bool         // the editor asked where the cursor is and waits for the answer
	pending atomic.Int64 // injected interrupts not yet returned by the editor
}

type inputChunk struct {
	b        []byte
	injected bool
}

// cursorQuery is the editor's question, cursorReport the terminal's
// answer (ESC [ row ; column R), as loosely as the editor reads it: an
// answer it takes that this did not would leave it waiting.
var (
	cursorQuery  = []byte("\x1b[6n")
	cursorReport = regexp.MustCompile(`\x1b\[[0-9;]*R`)
)

func newPromptInput(r io.Reader) *promptInput {
	p := &promptInput{}
	p.ready = sync.NewCond(&p.mu)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			p.mu.Lock()
			if n > 0 {
				if last := len(p.queue) - 1; last >= 0 && !p.queue[last].injected {
					p.queue[last].b = append(p.queue[last].b, buf[:n]...)
				} else {
					p.queue = append(p.queue, inputChunk{b: bytes.Clone(buf[:n])})
				}
			}
			if err != nil {
				p.err = err
			}
			p.ready.Broadcast()
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

// Read gives the editor what came first, up to the end of its first line
// or an interrupt; or, while the editor waits for the cursor's position,
// the terminal's report of it.
func (p *promptInput) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.cpr {
			for i := range p.queue {
				c := &p.queue[i]
				if loc := cursorReport.FindIndex(c.b); loc != nil && !c.injected && len(b) >= loc[1]-loc[0] {
					n := copy(b, c.b[loc[0]:loc[1]])
					c.b = append(c.b[:loc[0]:loc[0]], c.b[loc[1]:]...)
					if len(c.b) == 0 {
						p.queue = append(p.queue[:i], p.queue[i+1:]...)
					}
					p.cpr = false
					return n, nil
				}
			}
		} else if len(p.queue) > 0 {
			c := &p.queue[0]
			n := len(c.b)
			if i := bytes.IndexAny(c.b, "\r\n\x03"); i >= 0 {
				n = i + 1
			}
			n = copy(b, c.b[:n])
			if c.b = c.b[n:]; len(c.b) == 0 {
				p.queue = p.queue[1:]
			}
			return n, nil
		}
		if p.err != nil {
			return 0, p.err
		}
		p.ready.Wait()
	}
}

// output is w, as the editor's output: its cursor-position queries are
// noted (see Read).
func (p *promptInput) output(w io.Writer) io.Writer { return promptOutput{p, w} }

type promptOutput struct {
	p *promptInput
	w io.Writer
}

func (o promptOutput) Write(b []byte) (int, error) {
	if bytes.Contains(b, cursorQuery) {
		o.p.mu.Lock()
		o.p.cpr = true
		o.p.mu.Unlock()
	}
	return o.w.Write(b)
}

// interrupt ends the line being read (the editor reads the byte when it
// next reads).
func (p *promptInput) interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending.Add(1)
	p.queue = append(p.queue, inputChunk{b: []byte{3}, injected: true})
	p.ready.Broadcast()
}

// fresh drops what came before a prompt about a call shows and returns
// the text of it the person typed (interrupts injected for earlier
// prompts are dropped too, and no longer counted): the prompt's answer is
// what is typed after it showed.
func (p *promptInput) fresh() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var typed []byte
	for _, c := range p.queue {
		if c.injected {
			p.pending.Add(-1)
			continue
		}
		typed = append(typed, c.b...)
	}
	p.queue = nil
	return string(typed)
}

// injected reports whether an interrupt the editor returned was one the
// program injected (and counts it as read).
func (p *promptInput) injected() bool {
	for {
		n := p.pending.Load()
		if n == 0 {
			return false
		}
		if p.pending.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
