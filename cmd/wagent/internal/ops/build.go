package ops

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/guests/opbuild"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/render"
)

// wagent ops new and wagent ops build: writing an op from an empty folder,
// offline. The binary carries the guest kit's source (wagent.GuestKit);
// ops new copies it into the new module, ops build refreshes the copy and
// drives the Go toolchain (see guests/opbuild).

// NewOptions are what wagent ops new NAME [DIR] is given.
type NewOptions struct {
	Env
	Name string
	Dir  string // "": ./NAME
}

// New writes a new Go op module.
func New(o NewOptions) error {
	name, dir := o.Name, o.Dir
	if dir == "" {
		dir = name
	}
	if err := opbuild.New(dir, name, wagent.GuestKit()); err != nil {
		return app.Errorf(app.Failed, "ops new: %v", err)
	}
	render.Fprintf(o.Stdout, "wrote op %s in %s: go.mod, main.go (it owns one tool, shout), main_test.go, %s (the guest kit, ABI %s)\n",
		name, dir, opbuild.KitDir, hostabi.ABIVersion())
	render.Fprintf(o.Stdout, "next:\n  cd %s\n  go test ./...            # its unit test, natively\n  wagent ops build         # writes %s.wasm\n  wagent ops check %s.wasm\n", dir, name, name)
	return nil
}

// BuildOptions are what wagent ops build [DIR] [-o FILE.wasm] is given.
type BuildOptions struct {
	Env
	Dir string // "": the current directory
	Out string // "": NAME.wasm in Dir
}

// Build builds a Go op into a module with its manifest, refreshing the
// module's copy of the guest kit first.
func Build(ctx context.Context, o BuildOptions) error {
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	root, err := opbuild.ModuleRoot(dir)
	if err != nil {
		return app.Errorf(app.Failed, "ops build: %v", err)
	}
	if opbuild.UsesKit(root) {
		changed, err := opbuild.SyncKit(root, wagent.GuestKit())
		if err != nil {
			return app.Errorf(app.Failed, "ops build: refreshing %s: %v", filepath.Join(root, opbuild.KitDir), err)
		}
		if changed {
			render.Fprintf(o.Stderr, "wagent: refreshed %s from this wagent's guest kit (ABI %s)\n", opbuild.KitDir, hostabi.ABIVersion())
		}
	}
	start := time.Now()
	res, err := opbuild.Build(ctx, opbuild.Options{
		Dir: dir, Out: o.Out, Log: o.Stderr,
		Progress: func(step string) { render.Fprintf(o.Stderr, "wagent: %s…\n", step) },
	})
	if errors.Is(err, opbuild.ErrNoGo) {
		return app.Errorf(app.Failed, "ops build: %v", err)
	}
	if err != nil {
		return app.Errorf(app.Failed, "ops build: %s", oneLine(err.Error()))
	}
	var ops []string
	for _, m := range res.Manifests {
		s := m.Name + " " + m.Version
		if len(m.Tools) > 0 {
			s += " (tools " + strings.Join(m.Tools, ", ") + ")"
		}
		ops = append(ops, strings.TrimSpace(s))
	}
	render.Fprintf(o.Stdout, "wrote %s (%.1f MB) in %.1fs: %s\n", res.Out, float64(res.Bytes)/(1<<20), time.Since(start).Seconds(), strings.Join(ops, "; "))
	return nil
}
