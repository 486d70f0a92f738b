package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStartup measures how long the real binary takes from exec to
// its first model request: `wagent run` with the default pipeline (every
// built-in op loaded from the embedded bundle), against a local server
// that records when the request arrives and answers with one short text.
//
//	cold: fresh WAGENT_CACHE_DIR and WAGENT_HOME each iteration, so the
//	      bundle is compiled from scratch and the store is created;
//	warm: a compile cache filled by one untimed run, fresh WAGENT_HOME
//	      each iteration (the usual case: a new session on a used machine).
//
// ms-to-first-request is the figure that matters; ns/op is the whole
// process, answer and exit included.
//
// With WAGENT_BASELINE_BIN naming another build of wagent (an earlier
// commit's, say), warm runs alternate between the two binaries, each with
// its own cache, and report both and their ratio: a before and after from
// one run on a noisy machine.
func BenchmarkStartup(b *testing.B) {
	bin := wagentBin(b)
	hits := make(chan time.Time, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		select {
		case hits <- time.Now():
		default:
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop","index":0}]}`+"\n\n"+"data: [DONE]\n\n")
	}))
	defer srv.Close()

	var cpu time.Duration // the runs' user and system time
	runBin := func(b *testing.B, bin, home, cache string, timed bool, cpu *time.Duration) time.Duration {
		cmd := exec.Command(bin, "run", "--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m", "hi")
		cmd.Env = procEnv(map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cache, "OPENAI_API_KEY": "sk-dummy"})
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		for len(hits) > 0 {
			<-hits
		}
		if timed {
			b.StartTimer()
		}
		start := time.Now()
		err := cmd.Run()
		if timed {
			b.StopTimer()
		}
		if err != nil {
			b.Fatalf("wagent run: %v\n%s", err, out.String())
		}
		if timed {
			*cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if !bytes.Contains(out.Bytes(), []byte("ok")) {
			b.Fatalf("wagent run printed no answer:\n%s", out.String())
		}
		select {
		case at := <-hits:
			return at.Sub(start)
		default:
			b.Fatalf("the server saw no request\n%s", out.String())
			return 0
		}
	}
	runOnce := func(b *testing.B, home, cache string, timed bool) time.Duration {
		return runBin(b, bin, home, cache, timed, &cpu)
	}
	fresh := func(b *testing.B, parent, prefix string) string {
		d, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}

	b.Run("cold", func(b *testing.B) {
		cpu = 0
		tmp := b.TempDir()
		b.StopTimer()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += runOnce(b, fresh(b, tmp, "home-"), fresh(b, tmp, "cache-"), true)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-first-request")
	})
	b.Run("warm", func(b *testing.B) {
		cpu = 0
		tmp := b.TempDir()
		b.StopTimer()
		cache := filepath.Join(tmp, "cache")
		runOnce(b, fresh(b, tmp, "home-"), cache, false) // fills the cache
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += runOnce(b, fresh(b, tmp, "home-"), cache, true)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-first-request")
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/run")
	})
	base := os.Getenv("WAGENT_BASELINE_BIN")
	if base == "" {
		return
	}
	b.Run("warm-vs-baseline", func(b *testing.B) {
		tmp := b.TempDir()
		b.StopTimer()
		cache, baseCache := filepath.Join(tmp, "cache"), filepath.Join(tmp, "base-cache")
		var cpuNew, cpuBase time.Duration
		runBin(b, bin, fresh(b, tmp, "home-"), cache, false, &cpuNew)
		runBin(b, base, fresh(b, tmp, "home-"), baseCache, false, &cpuBase)
		var total, baseTotal time.Duration
		for i := 0; i < b.N; i++ {
			total += runBin(b, bin, fresh(b, tmp, "home-"), cache, true, &cpuNew)
			baseTotal += runBin(b, base, fresh(b, tmp, "home-"), baseCache, true, &cpuBase)
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
		b.ReportMetric(ms(total), "ms-to-first-request")
		b.ReportMetric(ms(cpuNew), "cpu-ms/run")
		b.ReportMetric(ms(baseTotal), "baseline-ms-to-first-request")
		b.ReportMetric(ms(cpuBase), "baseline-cpu-ms/run")
		b.ReportMetric(float64(total)/float64(baseTotal), "x_baseline")
		b.ReportMetric(float64(cpuNew)/float64(cpuBase), "x_baseline_cpu")
	})
}
