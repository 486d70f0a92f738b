package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/worker"
)

var natsFlag = &cli.StringFlag{Name: "nats", Usage: "the NATS store `URL`: nats://HOST:PORT[,nats://…][?stream=…&replicas=3] (the same as --store URL)"}

// natsURL is the command's NATS store: --nats, or a --store (or
// $WAGENT_STORE) that is a NATS URL; ok is false for a directory store.
func natsURL(c *cli.Context, env *cliEnv) (u string, ok bool, err error) {
	if u := c.String("nats"); u != "" {
		loc, err := parseStore(u)
		if err != nil {
			return "", false, err
		}
		if !loc.isNATS() {
			return "", false, fail(exitUsage, "--nats %s is not a NATS URL (nats://HOST:PORT)", u)
		}
		return u, true, nil
	}
	loc, err := storeLocation(c, env)
	if err != nil || !loc.isNATS() {
		return "", false, err
	}
	return loc.url, true, nil
}

func workerCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run the sessions of a NATS store, sharing them with any number of other workers",
		UsageText: `wagent worker --nats URL [--pipelines DIR] [--concurrency N] [--name NAME] [--lease-ttl D] [--events]

A worker takes wake-ups (a prompt sent, a decision made, a retry due) from
the store's queue, holds the session's lease while it advances it until it
yields, and lets go. Workers need no per-session flags: each session's
pipeline, provider and model come from its recorded settings, its API key
from the environment variable the settings name (--api-key-env) or the
provider's usual one. With --pipelines, pipeline and script files are
looked up by file name in DIR, whatever path the session recorded; without
it, they are read where the session recorded them only under a folder
$WAGENT_PROJECT_ROOTS lists, and a session's project folder (for
agents-md) likewise.

SIGINT or SIGTERM stops taking wake-ups; sessions being driven get 10s to
yield, then their turns are cut off where they are and another worker goes
on with them.

Examples:
   wagent worker --nats nats://127.0.0.1:4222
   wagent worker --nats 'nats://a:4222,nats://b:4222,nats://c:4222?replicas=3' --pipelines /etc/wagent/pipelines`,
		Flags: []cli.Flag{natsFlag, storeFlag,
			&cli.StringFlag{Name: "pipelines", Usage: "look up the sessions' pipeline and script files by name in `DIR`"},
			&cli.IntFlag{Name: "concurrency", Value: 16, Usage: "sessions driven at once"},
			&cli.StringFlag{Name: "name", Usage: "the worker's `NAME` in leases and writer ids (default HOST/PID; unique among live workers)"},
			&cli.DurationFlag{Name: "lease-ttl", Value: worker.DefaultLeaseTTL, Usage: "how long a session's lease lasts unrenewed, when this worker creates the lease bucket"},
			&cli.BoolFlag{Name: "events", Usage: "print what the worker does, one JSON object per line"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0, ""); err != nil {
				return err
			}
			u, ok, err := natsURL(c, env)
			if err != nil {
				return err
			}
			if !ok {
				return fail(exitUsage, "wagent worker needs a NATS store: --nats nats://HOST:PORT")
			}
			if c.Int("concurrency") < 1 {
				return fail(exitUsage, "--concurrency must be at least 1")
			}
			dir := c.String("pipelines")
			if dir != "" {
				if dir, err = filepath.Abs(dir); err != nil {
					return fail(exitUsage, "--pipelines: %v", err)
				}
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					return fail(exitUsage, "--pipelines %s is not a folder", dir)
				}
			}
			ctx, _, stop := session.SignalContext()
			defer stop()
			l, bus, err := openNATS(ctx, u, c.Duration("lease-ttl"))
			if err != nil {
				return err
			}
			defer l.Close()
			nopts := session.NodeOptions(env)
			nopts.Log, nopts.Drive, nopts.SharedLog, nopts.PipelinesDir = l, true, true, dir
			node, err := app.Open(ctx, nopts)
			if err != nil {
				return err
			}
			defer node.Close(context.Background())
			opts := worker.Options{
				Bus: bus, Name: c.String("name"), Concurrency: c.Int("concurrency"),
				Base:   engine.Config{Durability: engine.SyncAtBoundaries, Warn: nopts.Warn},
				Logger: slog.New(slog.NewTextHandler(safeWriter{env.Stderr}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			}
			if c.Bool("events") {
				opts.Observe = eventPrinter(env)
			}
			w, err := node.Worker(opts)
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			render.Fprintf(env.Stderr, "wagent worker %s: running the sessions of %s (%d at once, leases of %v); Ctrl-C stops\n", w.Name(), redactURL(u), opts.Concurrency, bus.LeaseTTL())
			if err := w.Run(ctx); err != nil {
				return fail(exitFailure, "%v", err)
			}
			render.Fprintf(env.Stderr, "wagent worker %s: stopped\n", w.Name())
			return nil
		},
	}
}

// eventPrinter prints a worker's events as JSON lines.
func eventPrinter(env *cliEnv) func(worker.Event) {
	var mu sync.Mutex
	return func(e worker.Event) {
		out := map[string]any{"kind": e.Kind, "session": e.Session, "time": e.Time.UTC().Format(time.RFC3339Nano)}
		if e.Writer != "" {
			out["writer"] = e.Writer
		}
		if !e.Until.IsZero() {
			out["until"] = e.Until.UTC().Format(time.RFC3339Nano)
		}
		if e.Kind == worker.EventDrove {
			out["transitions"], out["outcome"] = e.Transitions, e.Outcome.String()
		}
		if e.Err != nil {
			out["error"] = e.Err.Error()
		}
		b, _ := json.Marshal(out)
		mu.Lock()
		defer mu.Unlock()
		env.Stdout.Write(append(b, '\n'))
	}
}

// safeWriter writes log lines through the terminal sanitiser.
type safeWriter struct {
	w interface{ Write([]byte) (int, error) }
}

func (s safeWriter) Write(p []byte) (int, error) {
	render.Fprintf(s.w, "%s", string(p))
	return len(p), nil
}

// serveNATS is wagent serve for a NATS store: the API and the web console
// over TCP for sessions that workers run.
func serveNATS(ctx context.Context, c *cli.Context, env *cliEnv, u, token string) error {
	addr := c.String("listen")
	if addr == "" {
		return fail(exitUsage, "wagent serve on a NATS store needs --listen ADDR (there is no store folder for a socket)")
	}
	l, bus, err := openNATS(ctx, u, 0)
	if err != nil {
		return err
	}
	defer l.Close()
	opts := session.NodeOptions(env)
	opts.Log, opts.Wake, opts.Interrupt, opts.SharedLog, opts.Exposed = l, bus.Wake, bus.Interrupt, true, true
	node, err := app.Open(ctx, opts)
	if err != nil {
		return err
	}
	defer node.Close(context.Background())
	srv, err := server.New(node, server.Options{Token: token, Version: version, StoreName: redactURL(u), Console: console.FS()})
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(exitFailure, "listen on %s: %v", addr, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln, false)
	}()
	fmt.Fprintf(env.Stderr, "wagent: serving the sessions of %s on http://%s (the web console; token: wagent serve --print-token); workers run them (wagent worker --nats URL)\n", redactURL(u), ln.Addr())
	<-ctx.Done()
	ln.Close()
	<-done
	srv.Close(context.Background())
	return nil
}
