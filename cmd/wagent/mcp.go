package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/tools/mcp"
)

func mcpCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "work with the MCP servers of a pipeline",
		Subcommands: []*cli.Command{{
			Name:  "list",
			Usage: "start each MCP server of a pipeline, list its tools with their annotations, and stop it",
			UsageText: `wagent mcp list [--pipeline FILE] [--json]

Example:
   wagent mcp list --pipeline agent.yaml`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "pipeline", Usage: "pipeline `FILE` (YAML); default: the built-in pipeline"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object per server"},
			},
			Action: func(c *cli.Context) error {
				if err := needArgs(c, 0, 0, "[--pipeline FILE]"); err != nil {
					return err
				}
				spec := builtins.DefaultPipelineIn(app.SkillsDir(env.Getenv), "")
				if f := c.String("pipeline"); f != "" {
					abs, _ := filepath.Abs(f)
					var err error
					if spec, err = pipeline.ParseFile(abs); err != nil {
						return fail(exitFailure, "%v", err)
					}
				}
				return mcpList(c.Context, env, spec, c.Bool("json"))
			},
		}},
	}
}

// serverReport is what `wagent mcp list` says of one server.
type serverReport struct {
	Name     string       `json:"name"`
	Server   string       `json:"server,omitempty"`
	Version  string       `json:"version,omitempty"`
	Protocol string       `json:"protocol,omitempty"`
	Tools    []toolReport `json:"tools,omitempty"`
	Error    string       `json:"error,omitempty"`
}

type toolReport struct {
	Name        string   `json:"name"`
	Annotations []string `json:"annotations"`
	Description string   `json:"description,omitempty"`
}

// mcpList starts the servers in parallel, reports them in pipeline order,
// and ends them. It fails (exit 1) when a server could not start.
func mcpList(ctx context.Context, env *cliEnv, spec *pipeline.Spec, asJSON bool) error {
	hub := mcp.NewHub()
	defer hub.Close()
	var cfgs []mcp.Config
	for _, o := range spec.Ops {
		if o.MCP != nil {
			cfgs = append(cfgs, *o.MCP)
		}
	}
	if len(cfgs) == 0 {
		render.Fprintln(env.Stdout, "the pipeline has no MCP servers (add an entry \"- mcp: NAME\" with command: or url:)")
		return nil
	}
	reports := make([]serverReport, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i] = listOne(ctx, hub.Server(cfg))
		}()
	}
	wg.Wait()
	failed := 0
	for _, r := range reports {
		if r.Error != "" {
			failed++
		}
		if asJSON {
			term.PrintJSON(env.Stdout, r)
			continue
		}
		if r.Error != "" {
			render.Fprintf(env.Stdout, "%s: %s\n", r.Name, r.Error)
			continue
		}
		render.Fprintf(env.Stdout, "%s: %s %s, protocol %s, %d tools\n", r.Name, r.Server, r.Version, r.Protocol, len(r.Tools))
		for _, t := range r.Tools {
			render.Fprintf(env.Stdout, "  %-40s %s\n", t.Name, strings.Join(t.Annotations, ", "))
		}
	}
	if failed > 0 {
		return fail(exitFailure, "%d of %d MCP servers did not start", failed, len(cfgs))
	}
	return nil
}

func listOne(ctx context.Context, s *mcp.Server) serverReport {
	name := s.Config().Name
	r := serverReport{Name: name}
	in, err := s.Start(ctx)
	if err == nil {
		var tools []*mcpTool
		ts, lerr := s.Tools(ctx)
		err = lerr
		specs, _ := mcp.Specs(name, ts)
		for _, sp := range specs {
			tools = append(tools, &mcpTool{sp.Name, sp.Description, annotationWords(sp.Annotations.Hints())})
		}
		for _, t := range tools {
			r.Tools = append(r.Tools, toolReport{Name: t.name, Annotations: t.ann, Description: t.desc})
		}
	}
	if err != nil {
		r.Error = strings.TrimPrefix(err.Error(), "mcp server "+name+" ")
		return r
	}
	r.Server, r.Version, r.Protocol = in.Name, in.Version, in.Protocol
	return r
}

type mcpTool struct {
	name, desc string
	ann        []string
}

func annotationWords(h hostabiHints) []string {
	var out []string
	add := func(on bool, word string) {
		if on {
			out = append(out, word)
		}
	}
	add(h.ReadOnly, "read-only")
	add(h.Destructive, "destructive")
	add(h.Idempotent, "idempotent")
	add(h.OpenWorld, "open-world")
	if len(out) == 0 {
		out = []string{"writes, not destructive"}
	}
	return out
}

type hostabiHints = hostabi.ToolAnnotations
