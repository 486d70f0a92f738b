// Command wagent-build builds a wagent operation module inside this
// repository (outside it, wagent ops build does the same).
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
//
// The work is done by package guests/opbuild.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wagent/wagent/guests/opbuild"
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
		if *out == "" {
			*out = filepath.Base(fs.Arg(0)) + ".wasm"
		}
		_, err = opbuild.Build(context.Background(), opbuild.Options{Package: fs.Arg(0), Out: *out, Log: stderr})
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
	if mod, err = opbuild.Embed(mod, m, raw); err != nil {
		return fmt.Errorf("%s: %w", manifestFile, err)
	}
	return os.WriteFile(out, mod, 0o644)
}
