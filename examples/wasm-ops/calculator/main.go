// Command calculator is a drop-in wagent operation written in Go with the
// guest kit: a calculator whose running total survives restarts.
//
// It owns five tools. calc_add, calc_subtract, calc_multiply and
// calc_divide take {"value": number} and apply it to the running total
// (which starts at 0); calc_total takes {} and reports it. Each answers
// the new total as a plain decimal number. The total lives in the op's
// note "total", so a session resumed in another process, or on another
// machine, continues from the same number. Dividing by zero is an error
// result and leaves the total alone.
//
// Build it (from the repository root):
//
//	go run ./guests/cmd/wagent-build -o examples/wasm-ops/calculator/calculator.wasm ./examples/wasm-ops/calculator
package main

import (
	"strconv"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

var tools = []hostabi.ToolSpec{
	{Name: "calc_add", Description: "Add value to the running total. Returns the new total.", Parameters: valueSchema},
	{Name: "calc_subtract", Description: "Subtract value from the running total. Returns the new total.", Parameters: valueSchema},
	{Name: "calc_multiply", Description: "Multiply the running total by value. Returns the new total.", Parameters: valueSchema},
	{Name: "calc_divide", Description: "Divide the running total by value. Returns the new total.", Parameters: valueSchema},
	{Name: "calc_total", Description: "Return the running total (it starts at 0).", Parameters: []byte(`{"type":"object","properties":{}}`)},
}

var valueSchema = []byte(`{"type":"object","properties":{"value":{"type":"number"}},"required":["value"]}`)

func init() {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{
			Name:       "calculator",
			Version:    "1.0.0",
			Tools:      names,
			Idempotent: []string{"calc_total"},
		},
		Contribute: func(c *pdk.Call) error {
			for i := range tools {
				c.Emit(hostabi.Effect{Kind: hostabi.KindTool, Tool: &tools[i]})
			}
			return nil
		},
		Tool: run,
	})
}

func main() { pdk.Main() }

// run answers the call the host asks it to run; it skips otherwise (the
// host records tool/call first, then asks again with Run set).
func run(c *pdk.Call) error {
	t := c.View.Tool
	if t.Run == "" {
		return nil
	}
	var call *hostabi.PendingCall
	for i := range t.Calls {
		if t.Calls[i].ID == t.Run {
			call = &t.Calls[i]
		}
	}
	if call == nil {
		return nil
	}
	total := 0.0
	if s, ok := c.Note("total"); ok {
		total, _ = strconv.ParseFloat(s, 64)
	}
	var v float64
	if call.Name != "calc_total" {
		raw, ok := hostabi.Field(call.Arguments, "value")
		if !ok {
			c.Result(call.ID, `missing "value": call it with {"value": <number>}`, true)
			return nil
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			c.Result(call.ID, `"value" must be a number, got `+string(raw), true)
			return nil
		}
		v = f
	}
	switch call.Name {
	case "calc_add":
		total += v
	case "calc_subtract":
		total -= v
	case "calc_multiply":
		total *= v
	case "calc_divide":
		if v == 0 {
			c.Result(call.ID, "cannot divide by zero; the total is still "+format(total), true)
			return nil
		}
		total /= v
	}
	s := format(total)
	c.SetNote("total", s)
	c.Result(call.ID, s, false)
	return nil
}

func format(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
