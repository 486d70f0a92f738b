// Package opbuild builds wagent operation modules from Go guests (main
// packages that use the guest kit, guests/pdk), and embeds manifests in
// modules built by other toolchains. The wagent CLI (wagent ops build,
// wagent ops new) and guests/cmd/wagent-build are thin fronts for it.
//
// Building a Go guest takes two runs of the Go toolchain: the package is
// run natively, where pdk.Main prints the op's manifest, then built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath; the
// manifest, validated and written canonically, becomes the module's
// wagent.manifest custom section. The result is byte-identical for the
// same source and Go toolchain.
//
// The package runs on the host but imports only the standard library,
// hostabi and wasmhost/wasmbin (the binary format, itself standard
// library only), so it can live beside the guest code it builds.
package opbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// Options say what Build builds and where its output goes.
type Options struct {
	// Dir is the directory the go commands run in (default: the current
	// directory). Package is resolved against it.
	Dir string
	// Package is the Go package to build (default "."): a main package
	// that registers ops with pdk.Register and calls pdk.Main.
	Package string
	// Out is the module file to write. Empty writes NAME.wasm in Dir,
	// NAME being the op's name (the package's base name for a bundle).
	Out string
	// Log receives the Go toolchain's own output (compiler errors); nil
	// discards it.
	Log io.Writer
	// Progress, when set, is told what Build is about to do, before each
	// step that takes a while.
	Progress func(step string)
}

// Result describes a module Build wrote.
type Result struct {
	// Out is the file written.
	Out string
	// Manifests are the module's ops (one, or a bundle's).
	Manifests []*hostabi.Manifest
	// Bytes is the module's size.
	Bytes int
}

// ErrNoGo is returned when the Go toolchain cannot be run.
var ErrNoGo = errors.New("the Go toolchain (go) is not on PATH: building an op needs Go " + MinGo + " or later, from https://go.dev/dl")

// MinGo is the oldest Go release that builds ops (//go:wasmexport).
const MinGo = "1.24"

// Build builds a Go guest into a module with its manifest embedded.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Package == "" {
		o.Package = "."
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if err := checkGo(ctx); err != nil {
		return nil, err
	}
	progress("reading the manifest (go run " + o.Package + ", natively)")
	cmd := exec.CommandContext(ctx, "go", "run", "-trimpath", o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	var mbuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &mbuf, o.Log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go run %s failed (%v; its messages are above): fix them and build again", o.Package, err)
	}
	m, err := Canonical(bytes.TrimSpace(mbuf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("the manifest %s prints: %w", o.Package, err)
	}
	mans, err := hostabi.DecodeManifests(m)
	if err != nil {
		return nil, err
	}
	out := o.Out
	if out == "" {
		name := mans[0].Name
		if len(mans) > 1 {
			abs, err := filepath.Abs(filepath.Join(o.Dir, o.Package))
			if err != nil {
				return nil, err
			}
			name = filepath.Base(abs)
		}
		out = filepath.Join(o.Dir, name+".wasm")
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".wagent-build-*.wasm")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	abs, err := filepath.Abs(tmp.Name())
	if err != nil {
		return nil, err
	}
	progress("compiling for wasip1 (go build, the longest step)")
	cmd = exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", abs, o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build for wasip1 failed (%v; its messages are above): fix them and build again", err)
	}
	mod, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	if mod, err = SetCustomSection(mod, hostabi.ManifestSection, m); err != nil {
		return nil, err
	}
	if err := os.WriteFile(out, mod, 0o644); err != nil {
		return nil, err
	}
	return &Result{Out: out, Manifests: mans, Bytes: len(mod)}, nil
}

// checkGo checks that a Go toolchain that can build ops is on PATH.
func checkGo(ctx context.Context) error {
	if _, err := exec.LookPath("go"); err != nil {
		return ErrNoGo
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION failed (%v): check the Go installation on PATH", err)
	}
	v := strings.TrimSpace(string(out))
	if !atLeast(v, MinGo) {
		return fmt.Errorf("%s cannot build ops (they need //go:wasmexport): install Go %s or later from https://go.dev/dl", v, MinGo)
	}
	return nil
}

// atLeast reports whether the Go release goversion ("go1.26.8",
// "go1.25rc1", "devel …") is min ("1.24") or later. Development builds
// count as new enough.
func atLeast(goversion, min string) bool {
	v, ok := strings.CutPrefix(goversion, "go")
	if !ok {
		return true
	}
	num := func(s string) (int, string) {
		n, i := 0, 0
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			n = n*10 + int(s[i]-'0')
		}
		return n, strings.TrimPrefix(s[i:], ".")
	}
	for min != "" {
		var a, b int
		a, v = num(v)
		b, min = num(min)
		if a != b {
			return a > b
		}
	}
	return true
}

// Embed returns mod with manifest as its wagent.manifest section,
// replacing any it had: for modules built by other toolchains (WAT, C,
// Rust). The manifest is validated and written canonically unless raw is
// set, which embeds it as it is (for testing hosts with bad manifests).
func Embed(mod, manifest []byte, raw bool) ([]byte, error) {
	if !raw {
		var err error
		if manifest, err = Canonical(manifest); err != nil {
			return nil, err
		}
	}
	return SetCustomSection(mod, hostabi.ManifestSection, manifest)
}

// Canonical validates a manifest section (one manifest or a bundle) and
// returns it as the kit writes it.
func Canonical(b []byte) ([]byte, error) {
	ms, err := hostabi.DecodeManifests(b)
	if err != nil {
		return nil, err
	}
	if len(ms) == 1 && !bytes.Contains(b, []byte(`"bundle"`)) {
		return json.Marshal(ms[0])
	}
	var head struct {
		ABI string `json:"abi"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, err
	}
	bundle := hostabi.Bundle{ABI: head.ABI}
	for _, m := range ms {
		bundle.Ops = append(bundle.Ops, *m)
	}
	return json.Marshal(&bundle)
}

// SetCustomSection returns mod with every custom section called name
// removed and one with data appended at the end. The other sections are
// copied byte for byte.
func SetCustomSection(mod []byte, name string, data []byte) ([]byte, error) {
	out := append([]byte(nil), mod[:min(len(mod), 8)]...)
	for sec, err := range wasmbin.Sections(mod) {
		if err != nil {
			return nil, sectionsErr(err)
		}
		if custom, _, ok := sec.Custom(); !ok || custom != name {
			out = sec.AppendTo(out)
		}
	}
	return wasmbin.AppendCustomSection(out, name, data), nil
}

// CustomSections returns the payloads of a module's custom sections
// called name, in order.
func CustomSections(mod []byte, name string) ([][]byte, error) {
	var out [][]byte
	for sec, err := range wasmbin.Sections(mod) {
		if err != nil {
			return nil, sectionsErr(err)
		}
		if custom, payload, ok := sec.Custom(); ok && custom == name {
			out = append(out, payload)
		}
	}
	return out, nil
}

// sectionsErr words an error of wasmbin.Sections.
func sectionsErr(err error) error {
	var se *wasmbin.SectionError
	if errors.As(err, &se) {
		return fmt.Errorf("section at offset %d is truncated", se.Offset)
	}
	return errors.New("not a wasm module (bad magic)")
}
