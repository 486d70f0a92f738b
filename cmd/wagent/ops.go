package main

import (
	"context"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/ops"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/guests/opbuild"
)

// wagent ops: the commands on operation modules. Their work is done in
// package ops; here are their flags, usage and arguments.

func opsCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "ops",
		Usage: "write, build, inspect, check and test operation modules",
		Subcommands: []*cli.Command{
			opsNewCommand(env),
			opsBuildCommand(env),
			opsTestCommand(env),
			opsInspectCommand(env),
			opsCheckCommand(env),
		},
	}
}

// opsEnv is what package ops talks to.
func opsEnv(env *cliEnv) ops.Env {
	return ops.Env{Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Log: term.Warnings(env.Stderr)}
}

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
			return ops.New(ops.NewOptions{Env: opsEnv(env), Name: c.Args().Get(0), Dir: c.Args().Get(1)})
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
			return ops.Build(context.Background(), ops.BuildOptions{Env: opsEnv(env), Dir: c.Args().First(), Out: c.String("o")})
		},
	}
}

func opsTestCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "test",
		Usage: "check a module against the ABI with the conformance kit",
		UsageText: "wagent ops test FILE.wasm [--op NAME] [--config JSON | --config NAME=JSON ...] [--mount DIR:/PATH] [--timeout-ms N] [--memory-mb N] [--json]\n\n" +
			"Every hook each op declares is called with edge-case views (no messages, 10,000 messages, keys it does not know,\n" +
			"a long config, no notes); its effects must be valid for the hook and for its role at the tool hook (a guard decides,\n" +
			"an owner answers only the call the host asks it to run), the notes it writes must read back, and two fresh\n" +
			"instances and a reused one must answer alike. Exit 1 when a check fails.\n\n" +
			"Examples:\n   wagent ops test examples/wasm-ops/policy-c/policy.wasm --config '{\"allow\":[\"calc_total\"]}'\n" +
			"   wagent ops test builtins.wasm --config turn-stopping='{\"require_phrase\":\"DONE\"}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "op", Usage: "test only this op of a bundle"},
			&cli.GenericFlag{Name: "config", Value: &repeated{}, Usage: "an op's config as JSON (checked against its config_schema); NAME=JSON for one op of a bundle; repeat it for several"},
			&cli.StringSliceFlag{Name: "mount", Usage: "grant a read-only mount HOST_DIR:GUEST_PATH (default: an empty folder for each mount an op requests)"},
			&cli.Int64Flag{Name: "timeout-ms", Usage: "the deadline of each call and of starting the op (default: 1000 per call, 5000 to start)"},
			&cli.UintFlag{Name: "memory-mb", Usage: "the op's memory limit (default 32)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per check"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "FILE.wasm"); err != nil {
				return err
			}
			return ops.Test(context.Background(), ops.TestOptions{Env: opsEnv(env), Path: c.Args().First(), Op: c.String("op"),
				Configs: c.Generic("config").(*repeated).list, Mounts: c.StringSlice("mount"),
				TimeoutMS: c.Int64("timeout-ms"), MemoryMB: c.Uint("memory-mb"), JSON: c.Bool("json")})
		},
	}
}

// repeated is a flag that may be given several times, each value whole:
// a StringSliceFlag would split JSON at its commas.
type repeated struct{ list []string }

func (r *repeated) Set(v string) error { r.list = append(r.list, v); return nil }
func (r *repeated) String() string     { return strings.Join(r.list, " ") }

func opsInspectCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "show a module's manifest, tools, requests, limits and toolchain",
		UsageText: "wagent ops inspect FILE.wasm|builtin:NAME [--op NAME] [--pipeline FILE] [--json]\n\n" +
			"The manifest is read without running the module; the tools' schemas are what the op offers at the\n" +
			"contribute hook, asked once in the sandbox. With --pipeline, the limits, mounts and config of each entry\n" +
			"of FILE that runs this module (or an op of the same name: a new build of it) are shown as they would apply.\n\n" +
			"Examples:\n   wagent ops inspect examples/wasm-ops/calculator/calculator.wasm\n" +
			"   wagent ops inspect ops/policy.wasm --pipeline pipeline.yaml --op policy",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "op", Usage: "only this op of a bundle (or of the pipeline)"},
			&cli.StringFlag{Name: "pipeline", Usage: "show the limits this pipeline file gives the module's ops"},
			&cli.BoolFlag{Name: "json", Usage: "print everything as one JSON object"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "FILE.wasm|builtin:NAME"); err != nil {
				return err
			}
			return ops.Inspect(context.Background(), ops.InspectOptions{Env: opsEnv(env), Path: c.Args().First(),
				Op: c.String("op"), Pipeline: c.String("pipeline"), JSON: c.Bool("json")})
		},
	}
}

func opsCheckCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "load a module, start each op under its limits and call each hook it declares once",
		UsageText: "wagent ops check FILE.wasm|builtin:NAME [--op NAME] [--config JSON] [--mount DIR:/PATH[:rw]] [--http HOST] [--exec CMD] [--unconfined] [--timeout-ms N] [--memory-mb N]\n\n" +
			"Each hook gets a small view (a prompt, a call to decide or to run, a failed request, an answer, a command);\n" +
			"a trap, timeout or invalid effect is reported as a session would record it, and the exit code is 1.\n" +
			"Each op's requested and effective capabilities are shown; a capability the op requests and no flag grants\n" +
			"gets a sample grant that reaches nothing (an empty folder, the host check.invalid, the command true).\n\n" +
			"Examples:\n   wagent ops check ./ops/deny-word.wasm && echo ok\n   wagent ops check builtins.wasm --op max-turns --config '{\"max_steps\":3}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "op", Usage: "check only this op of a bundle"},
			&cli.StringFlag{Name: "config", Usage: "the op's config as JSON (checked against its config_schema)"},
			&cli.StringSliceFlag{Name: "mount", Usage: "grant a mount HOST_DIR:GUEST_PATH[:ro|:rw] (default: an empty folder for each mount the op requests)"},
			&cli.StringSliceFlag{Name: "http", Usage: "grant HTTP to a host (default: the hosts the op names; check.invalid for any)"},
			&cli.StringSliceFlag{Name: "exec", Usage: "grant a command, an argv pattern such as \"go test **\" (default: the commands the op names; true for any)"},
			&cli.BoolFlag{Name: "unconfined", Usage: "run the --exec commands without Landlock"},
			&cli.Int64Flag{Name: "timeout-ms", Usage: "the deadline of each call and of starting the op (default: 1000 per call, 5000 to start)"},
			&cli.UintFlag{Name: "memory-mb", Usage: "the op's memory limit (default 32)"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "FILE.wasm or builtin:NAME"); err != nil {
				return err
			}
			return ops.Check(context.Background(), ops.CheckOptions{Env: opsEnv(env), Path: c.Args().First(),
				Op: c.String("op"), Config: c.String("config"), Mounts: c.StringSlice("mount"), HTTP: c.StringSlice("http"),
				Exec: c.StringSlice("exec"), Unconfined: c.Bool("unconfined"), TimeoutMS: c.Int64("timeout-ms"), MemoryMB: c.Uint("memory-mb")})
		},
	}
}
