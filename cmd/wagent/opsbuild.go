package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/guests/opbuild"
	"github.com/wagent/wagent/hostabi"
)

// wagent ops new and wagent ops build: writing an op from an empty folder,
// offline. The binary carries the guest kit's source (wagent.GuestKit);
// ops new copies it into the new module, ops build refreshes the copy and
// drives the Go toolchain (see guests/opbuild).

func opsNewCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "new",
		Usage: "write a new Go op module (go.mod, main.go, a test, the guest kit) that wagent ops build builds",
		UsageText: `wagent ops new NAME [DIR]

DIR defaults to ./NAME; it must not exist or be empty. The module builds
offline: the guest kit's source is copied into DIR/.wagent/kit.

Example:
   wagent ops new myop && cd myop && go test ./... && wagent ops build`,
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 2, "NAME [DIR]"); err != nil {
				return err
			}
			name, dir := c.Args().Get(0), c.Args().Get(1)
			if dir == "" {
				dir = name
			}
			if err := opbuild.New(dir, name, wagent.GuestKit()); err != nil {
				return fail(exitFailure, "ops new: %v", err)
			}
			tprintf(env.stdout, "wrote op %s in %s: go.mod, main.go (it owns one tool, shout), main_test.go, %s (the guest kit, ABI %s)\n",
				name, dir, opbuild.KitDir, hostabi.ABIVersion())
			tprintf(env.stdout, "next:\n  cd %s\n  go test ./...            # its unit test, natively\n  wagent ops build         # writes %s.wasm\n  wagent ops check %s.wasm\n", dir, name, name)
			return nil
		},
	}
}

func opsBuildCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build a Go op (a main package using the guest kit) into a .wasm module with its manifest",
		UsageText: `wagent ops build [DIR] [-o FILE.wasm]

Builds the package in DIR (default: the current directory) with the Go
toolchain (go ` + opbuild.MinGo + ` or later on PATH) and writes NAME.wasm in DIR,
NAME being the op's name. A module written by wagent ops new gets its copy
of the guest kit refreshed from this wagent first.

Example:
   wagent ops build && wagent ops check myop.wasm`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "o", Usage: "write the module to `FILE.wasm`"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 1, "[DIR]"); err != nil {
				return err
			}
			dir := c.Args().First()
			if dir == "" {
				dir = "."
			}
			root, err := opbuild.ModuleRoot(dir)
			if err != nil {
				return fail(exitFailure, "ops build: %v", err)
			}
			if opbuild.UsesKit(root) {
				changed, err := opbuild.SyncKit(root, wagent.GuestKit())
				if err != nil {
					return fail(exitFailure, "ops build: refreshing %s: %v", filepath.Join(root, opbuild.KitDir), err)
				}
				if changed {
					fmt.Fprintf(env.stderr, "wagent: refreshed %s from this wagent's guest kit (ABI %s)\n", opbuild.KitDir, hostabi.ABIVersion())
				}
			}
			start := time.Now()
			res, err := opbuild.Build(context.Background(), opbuild.Options{
				Dir: dir, Out: c.String("o"), Log: env.stderr,
				Progress: func(step string) { fmt.Fprintf(env.stderr, "wagent: %s…\n", step) },
			})
			if errors.Is(err, opbuild.ErrNoGo) {
				return fail(exitFailure, "ops build: %v", err)
			}
			if err != nil {
				return fail(exitFailure, "ops build: %s", oneLine(err.Error()))
			}
			var ops []string
			for _, m := range res.Manifests {
				s := m.Name + " " + m.Version
				if len(m.Tools) > 0 {
					s += " (tools " + strings.Join(m.Tools, ", ") + ")"
				}
				ops = append(ops, strings.TrimSpace(s))
			}
			tprintf(env.stdout, "wrote %s (%.1f MB) in %.1fs: %s\n", res.Out, float64(res.Bytes)/(1<<20), time.Since(start).Seconds(), strings.Join(ops, "; "))
			return nil
		},
	}
}
