package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/internal/fakeopenai"
)

// BenchmarkChatFirstToken is the time from the Enter key to the first
// streamed word of the answer on the screen, in wagent chat (the real
// binary in a pseudo-terminal, the default pipeline, the store's owner in
// the same process) against the local fake server. Each iteration is one
// turn of one chat. Reported: p50 and p90 in ms, and, as the baseline in
// the same run, the fake server's own first chunk to a bare HTTP client
// (p50), so that what is wagent's is the difference.
//
//	go test -run '^$' -bench ChatFirstToken -benchtime 50x ./cmd/wagent/
//
// With WAGENT_BENCH_BEFORE naming another wagent binary (an older build),
// it runs as two sub-benchmarks, before (that binary) and after (this
// tree's), which -count N alternates in one run.
func BenchmarkChatFirstToken(b *testing.B) {
	before := os.Getenv("WAGENT_BENCH_BEFORE")
	if before == "" {
		chatFirstToken(b, wagentBin(b))
		return
	}
	b.Run("before", func(b *testing.B) { chatFirstToken(b, before) })
	b.Run("after", func(b *testing.B) { chatFirstToken(b, wagentBin(b)) })
}

func chatFirstToken(b *testing.B, bin string) {
	srv := fakeopenai.New(b, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "pong and then the rest of the answer", Chunks: 6}})
	env := map[string]string{"WAGENT_HOME": b.TempDir(), "WAGENT_CACHE_DIR": b.TempDir(), "XDG_CONFIG_HOME": b.TempDir(), "TERM": "xterm"}
	s := startScreenBin(b, bin, env, "chat", "--session", "bench", "--base-url", srv.URL, "--model", "m")
	// The screen reader says when output arrived; the time of the first
	// word is taken there, not by polling.
	notify := make(chan time.Time, 1)
	s.mu.Lock()
	s.onOutput = func(int) {
		select {
		case notify <- time.Now():
		default:
		}
	}
	s.mu.Unlock()
	// wait returns when the raw output after byte mark holds want (plain
	// compares without the terminal's control sequences, for echoed
	// typing the line editor redraws).
	wait := func(mark int, want string, plain bool) time.Time {
		deadline := time.After(60 * time.Second)
		for {
			s.mu.Lock()
			raw := s.buf.Bytes()[min(mark, s.buf.Len()):]
			found := bytes.Contains(raw, []byte(want)) || plain && strings.Contains(plainText(string(raw)), want)
			s.mu.Unlock()
			if found {
				return time.Now()
			}
			select {
			case at := <-notify:
				s.mu.Lock()
				raw := s.buf.Bytes()[min(mark, s.buf.Len()):]
				found := bytes.Contains(raw, []byte(want))
				s.mu.Unlock()
				if found {
					return at
				}
			case <-deadline:
				b.Fatalf("the screen does not show %q:\n%s", want, s.textNow())
			}
		}
	}
	rawLen := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.buf.Len() }
	wait(0, "› ", true)
	// One turn first: the wasm modules compile (or load from the cache)
	// when the first session opens, which is start-up, not a keystroke.
	m := rawLen()
	s.typeKeys("warm up\r")
	wait(m, "pong", false)
	wait(m, "› ", true)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		line := fmt.Sprintf("ping %d", i)
		m := rawLen()
		s.typeKeys(line)
		wait(m, line, true) // echoed: the line editor has it
		m = rawLen()
		b.StartTimer()
		t0 := time.Now()
		s.typeKeys("\r")
		t1 := wait(m, "pong", false)
		b.StopTimer()
		lat = append(lat, t1.Sub(t0))
		wait(m, "› ", true)
		b.StartTimer()
	}
	b.StopTimer()
	p50, p90 := percentile(lat, 50), percentile(lat, 90)
	b.ReportMetric(float64(p50.Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(p90.Microseconds())/1000, "ms-p90")
	// Baseline: the fake's first chunk to a bare client.
	var base []time.Duration
	for i := 0; i < max(b.N, 10); i++ {
		t0 := time.Now()
		resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"ping"}]}`))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte("pong")) {
				break
			}
		}
		base = append(base, time.Since(t0))
		resp.Body.Close()
	}
	b.ReportMetric(float64(percentile(base, 50).Microseconds())/1000, "ms-p50-fake-alone")
	s.typeKeys("\x04")
}

func (s *screen) textNow() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return plainText(s.buf.String())
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), d...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := (len(c)*p + 99) / 100
	return c[max(0, min(len(c)-1, i-1))]
}
