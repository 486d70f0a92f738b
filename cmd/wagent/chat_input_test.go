package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Issue 30, item 1: the chat's input never loses or invents a byte. Each
// test types real keys into wagent chat in a pseudo-terminal; a failure
// shows the screen.

// userMessages are the session's user messages, in order.
func userMessages(t *testing.T, env map[string]string, id string) []string {
	t.Helper()
	var out []string
	for _, u := range dataOf[event.UserMessage](t, logEvents(t, env, id), event.EvUserMessage) {
		out = append(out, u.Content)
	}
	return out
}

// waitIdle waits until the chat is back at its prompt after the screen
// showed anchor (the prompt drawn while a line was typed does not count).
func (s *screen) waitIdle(mark int, anchor string) {
	s.t.Helper()
	s.waitFor(mark, anchor)
	for {
		txt := s.text()[mark:]
		if strings.Contains(txt[strings.LastIndex(txt, anchor):], "› ") {
			return
		}
		s.waitFor(len(s.text()), "› ")
	}
}

// A bracketed paste of three lines is one message with its line breaks,
// sent by the Enter typed after it: one turn, not three.
func TestChatPasteIsOneMessage(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Got all three."}})
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "paste3", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	// A terminal sends the pasted line breaks as Enter (CR), between its
	// paste marks.
	s.typeKeys("\x1b[200~first line\rsecond line\r\nthird line\x1b[201~")
	s.waitFor(m, "third line")
	s.typeKeys("\r")
	s.waitIdle(m, "Got all three.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got, want := userMessages(t, env, "paste3"), []string{"first line\nsecond line\nthird line"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("user messages %q, want %q (one message)\nthe screen:\n%s", got, want, s.text())
	}
	// Alt-Enter and Ctrl-J start a new line in the message too.
	s = startScreen(t, env, "chat", "paste3")
	s.waitFor(0, "› ")
	m = s.mark()
	s.typeKeys("one\x1b\rtwo\nthree\r")
	s.waitIdle(m, "Got all three.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got := userMessages(t, env, "paste3"); len(got) != 2 || got[1] != "one\ntwo\nthree" {
		t.Fatalf("user messages %q, want the second to be one\\ntwo\\nthree\nthe screen:\n%s", got, s.text())
	}
}

// Ctrl-D while a turn streams does nothing, and /usage typed after it is
// the chat's command, answered at once; no message the model gets holds a
// NUL (the terminal's cooked mode kept that Ctrl-D in its buffer, and the
// line editor, switching to raw mode after the turn, read it as a NUL
// before /usage: the model got "\x00/usage").
func TestChatCtrlDMidStreamInventsNothing(t *testing.T) {
	fake := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Once upon a time, the end.", Chunks: 4}})
	base, release := heldModel(t, fake, "story")
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "nul", "--base-url", base, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("tell me a story\r")
	s.waitFor(m, "Once")
	s.typeKeys("\x04")     // Ctrl-D mid-stream
	s.typeKeys("/usage\r") // and /usage, still mid-stream: printed at once
	s.waitFor(m, "session  ")
	close(release)
	s.waitIdle(m, "the end.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	users := userMessages(t, env, "nul")
	for _, u := range users {
		if strings.ContainsRune(u, 0) {
			t.Errorf("a user message holds a NUL: %q", u)
		}
	}
	if fmt.Sprint(users) != fmt.Sprint([]string{"tell me a story"}) {
		t.Errorf("user messages %q, want only the story (/usage is the chat's)\nthe screen:\n%s", users, s.text())
	}
}

// /cancel typed while a turn streams ends that turn at once (the model's
// stream here would never finish): turn/end aborted, cause user.
func TestChatCancelMidTurnActsAtOnce(t *testing.T) {
	srv := stallingServer(t)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "cancel", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("tell me a story\r")
	s.waitFor(m, "Once upon")
	s.typeKeys("/cancel\r")
	s.waitFor(m, "(turn 1 ended: aborted, cause user: /cancel at the terminal")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	te := lastTurnEnd(t, env, "cancel")
	if te.Turn != 1 || te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.Kind != event.CauseUser {
		t.Fatalf("turn end %+v, want turn 1 aborted by the user\nthe screen:\n%s", te, s.text())
	}
	if users := userMessages(t, env, "cancel"); fmt.Sprint(users) != fmt.Sprint([]string{"tell me a story"}) {
		t.Errorf("user messages %q: /cancel is the chat's, never the model's", users)
	}
}

// What is typed while a turn streams is kept on the input line: Ctrl-C
// cancels the turn and the text is still there at the prompt, to send. At
// the prompt, Ctrl-C clears the line.
func TestChatTypingSurvivesCtrlC(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "story", Reply: fakeopenai.Reply{Text: "Once upon a time there was a very long story", Chunks: 8, Stream: fakeopenai.Stream{StallAfter: 3}}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Still here."}},
	)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "keep", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("tell me a story\r")
	s.waitFor(m, "Once upon")
	s.typeKeys("draft words")
	s.waitFor(m, "draft words") // echoed below the answer
	s.typeKeys("\x03")
	s.waitFor(m, "(turn 1 ended: aborted")
	s.waitFor(m, "› draft words") // the prompt, with the line as typed
	m = s.mark()
	s.typeKeys("\r")
	s.waitFor(m, "Still here.")
	s.waitFor(m, "› ")
	// At the prompt Ctrl-C clears a line that is not empty (and does not
	// leave, nor count towards leaving).
	m = s.mark()
	s.typeKeys("junk\x03again\r")
	s.waitIdle(m, "Still here.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got, want := userMessages(t, env, "keep"), []string{"tell me a story", "draft words", "again"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("user messages %q, want %q\nthe screen:\n%s", got, want, s.text())
	}
}

// heldModel is the fake model behind a proxy that holds the first answer
// to a request holding marker after its first word ("Once"), until
// release is closed: a turn that runs for as long as the test wants.
func heldModel(t *testing.T, fake *fakeopenai.Server, marker string) (url_ string, release chan struct{}) {
	release = make(chan struct{})
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	var held atomic.Bool
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			b, _ := io.ReadAll(r.In.Body)
			r.Out.Body = io.NopCloser(bytes.NewReader(b))
			r.Out.ContentLength = int64(len(b))
			if bytes.Contains(b, []byte(marker)) && held.CompareAndSwap(false, true) {
				r.Out.Header.Set("X-Hold", "1")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Header.Get("X-Hold") == "" {
				return nil
			}
			// The answer up to the end of the frame with its first word,
			// then nothing until release.
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			cut := len(body)
			if i := bytes.Index(body, []byte("Once")); i >= 0 {
				if j := bytes.Index(body[i:], []byte("\n\n")); j >= 0 {
					cut = i + j + 2
				}
			}
			pr, pw := io.Pipe()
			go func() {
				pw.Write(body[:cut])
				<-release
				pw.Write(body[cut:])
				pw.Close()
			}()
			resp.Body = pr
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
			return nil
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		srv.Close()
	})
	return srv.URL, release
}

// A prompt typed while a turn runs is sent as a follow-up: shown as
// queued at once, queued in the session during that turn, and run as the
// next turn when it ends, its answer shown.
func TestChatPromptDuringATurnIsAQueuedFollowUp(t *testing.T) {
	fake := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "and then", Reply: fakeopenai.Reply{Text: "Then it ended."}},
		fakeopenai.Rule{Role: "user", Contains: "slow story", Reply: fakeopenai.Reply{Text: "Once upon a time, the end.", Chunks: 4}},
	)
	base, release := heldModel(t, fake, "slow story")
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "follow", "--base-url", base, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("tell me a slow story\r")
	s.waitFor(m, "Once")
	s.typeKeys("and then?\r")
	s.waitFor(m, "queued: and then?")
	close(release)
	s.waitFor(m, "the end.")
	s.waitFor(m, "Then it ended.")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got, want := userMessages(t, env, "follow"), []string{"tell me a slow story", "and then?"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("user messages %q, want %q\nthe screen:\n%s", got, want, s.text())
	}
	// The follow-up was queued while turn 1 ran, and turn 2 answered it.
	var queuedAt, end1 uint64
	ends := map[int]string{}
	for _, e := range logEvents(t, env, "follow") {
		switch e.Type {
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			json.Unmarshal(e.Data, &d)
			for _, in := range d.Inserted {
				if in.Content == "and then?" {
					queuedAt = e.Seq
				}
			}
		case event.EvTurnEnd:
			var d event.TurnEnd
			json.Unmarshal(e.Data, &d)
			ends[d.Turn] = string(d.Reason)
			if d.Turn == 1 {
				end1 = e.Seq
			}
		}
	}
	if queuedAt == 0 || end1 == 0 || queuedAt > end1 {
		t.Errorf("the follow-up was queued at seq %d, turn 1 ended at seq %d: want it queued during turn 1", queuedAt, end1)
	}
	if ends[1] != string(event.ReasonCompleted) || ends[2] != string(event.ReasonCompleted) {
		t.Errorf("turn ends %v, want turns 1 and 2 completed", ends)
	}
}

// d at an approval prompt shows what the call would change, or says there
// is no preview; then the prompt still waits for its answer.
func TestChatApprovalDiffKey(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Added."}},
	)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "diff", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("add 2\r")
	s.waitFor(m, chatAsks(2))
	m = s.mark()
	s.typeKeys("d")
	s.waitFor(m, "no preview for this call")
	s.typeKeys("y")
	s.waitFor(m, "✓ 1.1.1 allowed by terminal")
	s.waitFor(m, "Added.")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
}

// The lines sent are kept per project folder, readable by their owner
// only; Up brings the last one back.
func TestChatHistoryPerProject(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Noted."}})
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "hist", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("remember\x1b\rtwo lines\r")
	s.waitIdle(m, "Noted.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	files, _ := filepath.Glob(filepath.Join(env["WAGENT_HOME"], "history", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("history files %v, want one for this folder", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file %v mode %v, want 0600", err, fi.Mode())
	}
	s = startScreen(t, env, "chat", "hist")
	s.waitFor(0, "› ")
	m = s.mark()
	s.typeKeys("\x1b[A\r") // Up, Enter: the last message again
	s.waitIdle(m, "Noted.")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got := userMessages(t, env, "hist"); len(got) != 2 || got[1] != "remember\ntwo lines" {
		t.Fatalf("user messages %q, want the first sent again from the history", got)
	}
}
