package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wagent/wagent/internal/npmtest"
)

// BenchmarkMCPStartup measures, warm (compile cache filled, the npm
// servers installed and run once), the time from exec of `wagent run` to
// its first model request with a pipeline of the approval op, and the
// same pipeline with two stdio MCP servers (the real everything and
// filesystem servers), which start before the first request because
// their tools are offered in it; they start in parallel.
//
//	go test -run '^$' -bench MCPStartup -benchtime 10x ./cmd/wagent/
func BenchmarkMCPStartup(b *testing.B) {
	bin := wagentBin(b)
	everything := npmtest.Bin(b, "mcp-server-everything")
	files := npmtest.Bin(b, "mcp-server-filesystem")
	hits := make(chan time.Time, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hits <- time.Now():
		default:
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop","index":0}]}`+"\n\n"+"data: [DONE]\n\n")
	}))
	defer srv.Close()
	tmp := b.TempDir()
	cache := filepath.Join(tmp, "cache")
	base := "ops:\n  - use: builtin:approval\n    config: {mode: auto}\n"
	pipes := map[string]string{
		"without-mcp":       base,
		"two-stdio-servers": base + fmt.Sprintf("  - mcp: everything\n    command: [%s, stdio]\n  - mcp: files\n    command: [%s, %s]\n", everything, files, tmp),
	}
	runOnce := func(b *testing.B, pipe string) time.Duration {
		home, _ := os.MkdirTemp(tmp, "home-")
		cmd := exec.Command(bin, "run", "--pipeline", pipe, "--provider", "openai", "--base-url", srv.URL+"/v1", "--model", "m", "hi")
		cmd.Env = procEnv(map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cache, "OPENAI_API_KEY": "sk-dummy"})
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		for len(hits) > 0 {
			<-hits
		}
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("wagent run: %v\n%s", err, out.String())
		}
		select {
		case at := <-hits:
			return at.Sub(start)
		default:
			b.Fatalf("no request\n%s", out.String())
			return 0
		}
	}
	for _, name := range []string{"without-mcp", "two-stdio-servers"} {
		pipe := filepath.Join(tmp, name+".yaml")
		os.WriteFile(pipe, []byte(pipes[name]), 0o644)
		b.Run(name, func(b *testing.B) {
			runOnce(b, pipe) // warm: cache, node's own caches
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += runOnce(b, pipe)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-first-request")
		})
	}
}
