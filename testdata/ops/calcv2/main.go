// Command calcv2 is a second build of the calculator example
// (examples/wasm-ops/calculator) that answers differently: the same op
// name, tools and descriptions, but every total comes back with two
// decimals and a word ("total 40.00"). The replay tests swap it in for the
// calculator (wagent replay --op calculator=calcv2.wasm) to show that a
// tool that answers differently is not a divergence: recorded results are
// fed back.
package main

import (
	"errors"
	"strconv"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

type operand struct{ Value float64 }

func (a *operand) Fields(f *pdk.Fields) { f.Float("value", &a.Value).Required() }

func apply(name, doc string, op func(total, v float64) (float64, error)) pdk.OwnedTool {
	return pdk.Tool(hostabi.ToolSpec{Name: name, Description: doc + " Returns the new total."},
		func(c *pdk.Call, a operand) (string, error) {
			t, err := op(total(c), a.Value)
			if err != nil {
				return "", err
			}
			c.SetNote("total", strconv.FormatFloat(t, 'f', -1, 64))
			return format(t), nil
		})
}

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "calculator", Version: "2.0.0"},
		Tools: []pdk.OwnedTool{
			apply("calc_add", "Add value to the running total.", func(t, v float64) (float64, error) { return t + v, nil }),
			apply("calc_subtract", "Subtract value from the running total.", func(t, v float64) (float64, error) { return t - v, nil }),
			apply("calc_multiply", "Multiply the running total by value.", func(t, v float64) (float64, error) { return t * v, nil }),
			apply("calc_divide", "Divide the running total by value.", func(t, v float64) (float64, error) {
				if v == 0 {
					return t, errors.New("division by zero")
				}
				return t / v, nil
			}),
			pdk.Tool(hostabi.ToolSpec{Name: "calc_total", Description: "Return the running total (it starts at 0)."},
				func(c *pdk.Call, _ pdk.NoArgs) (string, error) { return format(total(c)), nil }, pdk.Idempotent()),
		},
	})
}

func main() { pdk.Main() }

func total(c *pdk.Call) float64 {
	s, _ := c.Note("total")
	t, _ := strconv.ParseFloat(s, 64)
	return t
}

func format(f float64) string { return "total " + strconv.FormatFloat(f, 'f', 2, 64) }
