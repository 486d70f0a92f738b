package pdk_test

import (
	"fmt"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

type greetArgs struct {
	Name  string
	Times int
}

func (a *greetArgs) Fields(f *pdk.Fields) {
	f.String("name", &a.Name).Required().Describe("who to greet")
	f.Int("times", &a.Times)
}

// A tool op: the kit offers greet at contribute, decodes its arguments,
// and runs it only when the host asks (View.Tool.Run). A real op calls
// Register from init and has func main() { pdk.Main() }; here pdk.Test
// plays the host.
func Example() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "greeter", Version: "1.0.0"},
		Tools: []pdk.OwnedTool{
			pdk.Tool(hostabi.ToolSpec{Name: "greet", Description: "Greet someone."},
				func(c *pdk.Call, a greetArgs) (string, error) {
					return strings.TrimSpace(strings.Repeat("Hello, "+a.Name+"! ", max(a.Times, 1))), nil
				}),
		},
	})

	offer, _ := pdk.Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "greeter"}, nil)
	fmt.Println(string(offer[0].Tool.Parameters))

	run := func(args string) {
		effects, err := pdk.Test(&hostabi.View{Hook: hostabi.HookTool, Op: "greeter", Tool: &hostabi.ToolView{
			Run:   "c1",
			Calls: []hostabi.PendingCall{{ID: "c1", Name: "greet", Arguments: []byte(args), Owner: "greeter"}},
		}}, nil)
		if err != nil {
			panic(err)
		}
		fmt.Printf("error=%v %s\n", effects[0].IsError, effects[0].Content)
	}
	run(`{"name":"Ada","times":2}`)
	run(`{"nme":"Ada"}`)
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"},"times":{"type":"integer"}},"required":["name"],"additionalProperties":false}
	// error=false Hello, Ada! Hello, Ada!
	// error=true greet was not run, its arguments are wrong: unknown argument "nme" (the keys are name, times); missing required argument "name". Call it again with arguments that fit its parameters.
}

type budget struct {
	MaxSteps int
	Hint     string
}

func (b *budget) Fields(f *pdk.Fields) {
	f.Int("max_steps", &b.MaxSteps)
	f.String("hint", &b.Hint)
}

// Config decodes the pipeline's config for the op, keeping the defaults
// set before it for keys the pipeline leaves out.
func ExampleCall_Config() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "budget"},
		Contribute: func(c *pdk.Call) error {
			cfg := budget{MaxSteps: 10, Hint: "steps left"}
			if err := c.Config(&cfg); err != nil {
				return err
			}
			if left := cfg.MaxSteps - c.View.Step; left <= 0 {
				c.EndTurn("step budget spent")
			} else {
				c.TopOfMind(fmt.Sprintf("%d %s", left, cfg.Hint))
			}
			return nil
		},
	})
	for _, config := range []string{`{"max_steps": 4}`, `{"max_steps": 2}`, `{"max_step": 4}`} {
		effects, err := pdk.Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "budget", Step: 2, Config: []byte(config)}, nil)
		if err != nil {
			fmt.Println("fault:", err)
			continue
		}
		fmt.Println(effects[0].Kind, effects[0].Text)
	}
	// Output:
	// top_of_mind 2 steps left
	// end_turn step budget spent
	// fault: config: unknown config key "max_step" (the keys are max_steps, hint)
}
