package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
)

func serveCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "own a store: run its sessions and serve the API and web console until stopped",
		UsageText: `wagent serve [--listen ADDR] [--print-token]

Every wagent command talks to the store's owner while one runs; wagent
serve is a long-lived one. Clients on this machine use the Unix socket in
the store's directory (its file mode lets only you in); with --listen it
also serves HTTP on ADDR, where every request needs the bearer token and
the web console is at /.

Examples:
   wagent serve
   wagent serve --listen 127.0.0.1:8421
   wagent serve --print-token
   wagent serve --nats nats://127.0.0.1:4222 --listen 127.0.0.1:8421   # sessions that workers run`,
		Flags: []cli.Flag{storeFlag, natsFlag,
			&cli.StringFlag{Name: "listen", Usage: "also serve HTTP on `ADDR` (host:port), token required"},
			&cli.BoolFlag{Name: "print-token", Usage: "print the bearer token TCP clients need, and exit"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0, ""); err != nil {
				return err
			}
			token, err := loadToken(env)
			if err != nil {
				return err
			}
			if c.Bool("print-token") {
				render.Fprintln(env.Stdout, token)
				return nil
			}
			ctx, _, stop := session.SignalContext()
			defer stop()
			if u, ok, err := natsURL(c, env); err != nil {
				return err
			} else if ok {
				return serveNATS(ctx, c, env, u, token)
			}
			dir, err := storeDir(c, env)
			if err != nil {
				return err
			}
			if cl, err := server.Dial(ctx, dir); err == nil {
				h, _ := cl.Health(ctx)
				return fail(exitFailure, "the store %s is already served by process %d; stop it first, or use another --store", dir, h.PID)
			}
			addr := c.String("listen")
			// With --listen, sessions may come from anyone with the token.
			o, err := session.OpenOwner(ctx, env, session.Store{Dir: dir, Version: version, Preload: func() []byte { return preloadFor(c, env) }}, session.ModeDrive, addr != "")
			if err != nil {
				return err
			}
			o.Server.SetToken(token)
			var ln net.Listener
			if addr != "" {
				if ln, err = net.Listen("tcp", addr); err != nil {
					o.Shutdown()
					return fail(exitFailure, "listen on %s: %v", addr, err)
				}
				go o.Server.Serve(ln, false)
				fmt.Fprintf(env.Stderr, "wagent: serving %s on %s and http://%s (the web console; token: wagent serve --print-token)\n", dir, server.SocketPath(dir), ln.Addr())
			} else {
				fmt.Fprintf(env.Stderr, "wagent: serving %s on %s (Ctrl-C stops)\n", dir, server.SocketPath(dir))
			}
			<-ctx.Done()
			fmt.Fprintln(env.Stderr, "wagent: stopping: running turns end as disposed and go on at the next start")
			if ln != nil {
				ln.Close()
			}
			o.Server.Close(context.Background())
			o.Shutdown()
			return nil
		},
	}
}

// tokenPath is where wagent serve keeps its bearer token: the data
// directory, readable by its owner only.
func tokenPath(env *cliEnv) (string, error) {
	if h := env.Getenv("WAGENT_HOME"); h != "" {
		return filepath.Join(h, "token"), nil
	}
	if x := env.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "wagent", "token"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fail(exitFailure, "cannot find a home for the token (%v): set WAGENT_HOME", err)
	}
	return filepath.Join(home, ".local", "share", "wagent", "token"), nil
}

// loadToken reads the token, making one on first use. The file is made
// whole under another name and linked into place, which fails if it is
// there already: of two wagent serve starting at once, both use the token
// the first made. A file others can read is refused: it is no secret.
func loadToken(env *cliEnv) (string, error) {
	path, err := tokenPath(env)
	if err != nil {
		return "", err
	}
	for tries := 0; ; tries++ {
		if tok, err := readToken(path); err != nil || tok != "" {
			return tok, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", fail(exitFailure, "%v", err)
		}
		token := session.RandomToken()
		f, err := os.CreateTemp(filepath.Dir(path), ".token-*") // 0600
		if err != nil {
			return "", fail(exitFailure, "write the token: %v", err)
		}
		_, err = f.WriteString(token + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(f.Name(), path)
		}
		os.Remove(f.Name())
		switch {
		case err == nil:
			return token, nil
		case errors.Is(err, fs.ErrExist) && tries < 3:
			continue // another wagent made it first: use theirs
		default:
			return "", fail(exitFailure, "write the token: %v", err)
		}
	}
}

// readToken returns the token in the file at path, "" if there is none.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fail(exitFailure, "read the token: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fail(exitFailure, "read the token: %v", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fail(exitFailure, "the token file %s is readable by others (mode %04o), so it is no secret: remove it and a new token is made", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fail(exitFailure, "read the token: %v", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fail(exitFailure, "the token file %s holds no token (one line of at least 32 characters): remove it and a new one is made", path)
	}
	return tok, nil
}
