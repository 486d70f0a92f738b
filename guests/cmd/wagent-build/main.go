// Command wagent-build builds a wagent operation module.
//
//	wagent-build [-o OUT.wasm] PACKAGE
//
// builds a Go guest (a main package using guests/pdk): it runs the package
// natively to print its manifest, builds it with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath, and
// writes the module with the manifest in its wagent.manifest custom
// section. The output is byte-identical for the same source and Go
// toolchain.
//
//	wagent-build -manifest MANIFEST.json [-raw] -o OUT.wasm IN.wasm
//
// embeds a manifest in a module built by any other toolchain (WAT, C,
// Rust), replacing a wagent.manifest section it already has. The manifest
// is validated and written canonically unless -raw is given (which embeds
// the file's bytes as they are, for testing hosts with bad manifests).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/wagent/wagent/hostabi"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wagent-build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output `file` (default: the package's base name + .wasm)")
	manifest := fs.String("manifest", "", "embed this manifest `file` in an existing module instead of building a Go package")
	raw := fs.Bool("raw", false, "with -manifest: embed the file as it is, without validating it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: wagent-build [-o OUT.wasm] PACKAGE | wagent-build -manifest FILE.json [-raw] -o OUT.wasm IN.wasm")
		return 2
	}
	var err error
	if *manifest != "" {
		err = embedFile(fs.Arg(0), *manifest, *out, *raw)
	} else {
		err = buildGo(fs.Arg(0), *out, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "wagent-build:", err)
		return 1
	}
	return 0
}

func embedFile(in, manifestFile, out string, raw bool) error {
	if out == "" {
		return errors.New("-manifest needs -o OUT.wasm")
	}
	mod, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	m, err := os.ReadFile(manifestFile)
	if err != nil {
		return err
	}
	if !raw {
		if m, err = canonical(m); err != nil {
			return fmt.Errorf("%s: %w", manifestFile, err)
		}
	}
	mod, err = SetCustomSection(mod, hostabi.ManifestSection, m)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, mod, 0o644)
}

func canonical(b []byte) ([]byte, error) {
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
	json.Unmarshal(b, &head)
	bundle := hostabi.Bundle{ABI: head.ABI}
	for _, m := range ms {
		bundle.Ops = append(bundle.Ops, *m)
	}
	return json.Marshal(&bundle)
}

func buildGo(pkg, out string, stderr io.Writer) error {
	if out == "" {
		out = filepath.Base(pkg) + ".wasm"
	}
	// The manifest: run the package natively, where pdk.Main prints it.
	cmd := exec.Command("go", "run", "-trimpath", pkg)
	cmd.Env = append(os.Environ(), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	var mbuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &mbuf, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("printing the manifest of %s (go run): %w", pkg, err)
	}
	m, err := canonical(bytes.TrimSpace(mbuf.Bytes()))
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", pkg, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".wagent-build-*.wasm")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd = exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", tmp.Name(), pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for wasip1: %w", pkg, err)
	}
	mod, err := os.ReadFile(tmp.Name())
	if err != nil {
		return err
	}
	if mod, err = SetCustomSection(mod, hostabi.ManifestSection, m); err != nil {
		return err
	}
	return os.WriteFile(out, mod, 0o644)
}

// SetCustomSection returns mod with every custom section called name
// removed and one with data appended at the end.
func SetCustomSection(mod []byte, name string, data []byte) ([]byte, error) {
	if len(mod) < 8 || string(mod[:4]) != "\x00asm" {
		return nil, errors.New("not a wasm module (bad magic)")
	}
	out := append([]byte(nil), mod[:8]...)
	for i := 8; i < len(mod); {
		start := i
		id := mod[i]
		i++
		size, n := uleb(mod[i:])
		if n == 0 || uint64(len(mod)-i-n) < size {
			return nil, fmt.Errorf("section at offset %d is truncated", start)
		}
		i += n
		body := mod[i : i+int(size)]
		i += int(size)
		if id == 0 {
			l, m := uleb(body)
			if m > 0 && uint64(len(body)-m) >= l && string(body[m:m+int(l)]) == name {
				continue
			}
		}
		out = append(out, mod[start:i]...)
	}
	payload := appendUleb(nil, uint64(len(name)))
	payload = append(payload, name...)
	payload = append(payload, data...)
	out = append(out, 0)
	out = appendUleb(out, uint64(len(payload)))
	return append(out, payload...), nil
}

func uleb(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

func appendUleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}
