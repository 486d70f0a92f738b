package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SocketName is the owner's socket in the store directory.
const SocketName = "wagent.sock"

// pointerName, in the store directory, names the socket when the store's
// path is too long for a Unix socket address.
const pointerName = "wagent.sock.path"

// maxSocketPath is the longest socket path every Unix accepts.
const maxSocketPath = 100

// SocketPath returns where the owner of the store in dir listens: the
// socket in dir, or, when that path is too long for a socket address, one
// in a private (0700) directory under the temporary directory, named by a
// digest of dir.
func SocketPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	p := filepath.Join(abs, SocketName)
	if len(p) <= maxSocketPath {
		return p
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), fmt.Sprintf("wagent-%d", os.Getuid()), hex.EncodeToString(sum[:8])+".sock")
}

// ErrNoOwner: no live owner answers for the store.
var ErrNoOwner = errors.New("server: no owner is serving this store")

// Dial returns a client of the live owner of the store in dir, after
// checking it answers; ErrNoOwner when there is none (no socket, or one a
// dead owner left behind).
func Dial(ctx context.Context, dir string) (*Client, error) {
	path := SocketPath(dir)
	if _, err := os.Stat(path); err != nil {
		return nil, ErrNoOwner
	}
	if filepath.Dir(path) != mustAbs(dir) && checkPrivate(filepath.Dir(path)) != nil {
		// A socket in a shared directory someone else controls is not
		// the owner's: Listen refuses to serve there, saying why.
		return nil, ErrNoOwner
	}
	c := NewUnixClient(path)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.Health(ctx); err != nil {
		return nil, ErrNoOwner
	}
	return c, nil
}

// Listen makes the owner's socket for the store in dir, readable and
// writable by its owner only. The caller must hold the store (its lock):
// a socket already there was left by an owner that died, and is replaced.
// The returned func closes the listener and removes the socket.
func Listen(dir string) (net.Listener, func(), error) {
	path := SocketPath(dir)
	if filepath.Dir(path) != mustAbs(dir) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, nil, fmt.Errorf("server: make the socket directory: %w", err)
		}
		// It is under the shared temporary directory: whoever made it
		// first could replace the socket, so it must be ours alone.
		if err := checkPrivate(filepath.Dir(path)); err != nil {
			return nil, nil, fmt.Errorf("server: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, pointerName), []byte(path+"\n"), 0o600); err != nil {
			return nil, nil, fmt.Errorf("server: %w", err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("server: remove the stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("server: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("server: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	closeFn := func() {
		ln.Close()
		os.Remove(path)
		if strings.HasSuffix(path, ".sock") && filepath.Dir(path) != mustAbs(dir) {
			os.Remove(filepath.Join(dir, pointerName))
		}
	}
	return ln, closeFn, nil
}

func mustAbs(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}
