//go:build e2e

package jetstream_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store/jetstream"
)

// TestE2EOldServer opens the store on a real nats-server older than the
// store needs: Debian's 2.9.10 (scripts/deps.sh e2e installs it;
// $WAGENT_OLD_NATS_SERVER names another binary). Open must refuse it in
// one line naming the feature and the release, and create nothing.
func TestE2EOldServer(t *testing.T) {
	bin := os.Getenv("WAGENT_OLD_NATS_SERVER")
	if bin == "" {
		bin = "/usr/sbin/nats-server"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v (install Debian's nats-server with scripts/deps.sh e2e, or name an old one with WAGENT_OLD_NATS_SERVER)", bin, err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(string(out), "nats-server:")), "v")
	if !strings.HasPrefix(version, "2.9.") && !strings.HasPrefix(version, "2.10.") && !strings.HasPrefix(version, "2.11.") {
		t.Fatalf("%s is %s: this test needs one older than %s", bin, version, jetstream.MinServerVersion)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server is ready") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not say it was ready within 30s", bin)
	}

	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = jetstream.OpenURL(ctx, url)
	want := "nats-server at " + url + " is " + version + "; the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later): upgrade it ("
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("OpenURL on nats-server %s: %v\nwant one line starting %q", version, err, want)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, jetstream.DefaultStream); !errors.Is(err, natsjs.ErrStreamNotFound) {
		t.Fatalf("the refused Open left stream %s behind (or the lookup failed): %v", jetstream.DefaultStream, err)
	}
}
