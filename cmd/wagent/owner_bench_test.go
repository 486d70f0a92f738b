package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
)

// BenchmarkSteerLatency measures `wagent steer S TEXT` as a user types it
// in a second shell: the time from exec of the command to the steering's
// inbox/spliced event in the session's log.
//
//   - through-owner: a `wagent serve` holds the store; the steer goes
//     through its socket, and the clock stops when the owner's log stream
//     delivers the event (the command may still be exiting).
//   - direct: no owner; the command opens the idle store itself, and the
//     clock stops when it returns (its event is durable by then).
//
// Reported: p50 and p99 in milliseconds over b.N commands.
//
//	go test -run '^$' -bench SteerLatency -benchtime 50x ./cmd/wagent/
func BenchmarkSteerLatency(b *testing.B) {
	bin := wagentBin(b)
	tmp := b.TempDir()
	script := filepath.Join(tmp, "s.yaml")
	os.WriteFile(script, []byte("replies:\n  - content: \"ok\"\n"), 0o644)
	cache := filepath.Join(tmp, "cache")
	run := func(b *testing.B, home string, args ...string) {
		b.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = procEnv(map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cache})
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("wagent %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	report := func(b *testing.B, lat []time.Duration) {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		at := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		b.ReportMetric(at(0.50), "p50-ms")
		b.ReportMetric(at(0.99), "p99-ms")
		b.ReportMetric(0, "ns/op")
	}

	b.Run("direct", func(b *testing.B) {
		home, _ := os.MkdirTemp(tmp, "home-")
		run(b, home, "run", "--session", "S", "--script", script, "hi")
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			run(b, home, "steer", "S", fmt.Sprintf("steer %d", i))
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		report(b, lat)
	})

	b.Run("through-owner", func(b *testing.B) {
		home, _ := os.MkdirTemp(tmp, "home-")
		serve := exec.Command(bin, "serve")
		serve.Env = procEnv(map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cache})
		var serveOut bytes.Buffer
		serve.Stdout, serve.Stderr = &serveOut, &serveOut
		if err := serve.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { serve.Process.Kill(); serve.Wait() }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var cl *server.Client
		for deadline := time.Now().Add(30 * time.Second); ; {
			c, err := server.Dial(ctx, filepath.Join(home, "store"))
			if err == nil {
				cl = c
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("wagent serve did not answer on its socket: %v\n%s", err, serveOut.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		run(b, home, "run", "--session", "S", "--script", script, "hi")
		evs, err := cl.Events(ctx, "S", 1, 0)
		if err != nil {
			b.Fatal(err)
		}
		spliced := make(chan string, 1024)
		go cl.Stream(ctx, "S", evs.Head+1, func(ev server.StreamEvent) error {
			if ev.Event != nil && ev.Event.Type == event.EvInboxSpliced {
				spliced <- string(ev.Event.Data)
			}
			return nil
		})
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			text := fmt.Sprintf("steer %d", i)
			t0 := time.Now()
			cmd := exec.Command(bin, "steer", "S", text)
			cmd.Env = procEnv(map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cache})
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			for seen := false; !seen; {
				select {
				case data := <-spliced:
					seen = strings.Contains(data, `"`+text+`"`)
				case <-time.After(30 * time.Second):
					b.Fatalf("no inbox/spliced for %q\n%s", text, out.String())
				}
			}
			lat = append(lat, time.Since(t0))
			if err := cmd.Wait(); err != nil {
				b.Fatalf("wagent steer: %v\n%s", err, out.String())
			}
		}
		b.StopTimer()
		report(b, lat)
	})
}
