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
// Build it (from the repository root; make guests does it):
//
//	go run ./guests/cmd/wagent-build -o examples/wasm-ops/calculator/calculator.wasm ./examples/wasm-ops/calculator
package main

import (
	"errors"
	"strconv"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

type operand struct{ Value float64 }

func (a *operand) Fields(f *pdk.Fields) { f.Float("value", &a.Value).Required() }

// apply makes a tool that changes the total by op.
func apply(name, doc string, op func(total, v float64) (float64, error)) pdk.OwnedTool {
	return pdk.Tool(hostabi.ToolSpec{Name: name, Description: doc + " Returns the new total."},
		func(c *pdk.Call, a operand) (string, error) {
			t, err := op(total(c), a.Value)
			if err != nil {
				return "", err
			}
			s := format(t)
			c.SetNote("total", s)
			return s, nil
		})
}

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "calculator", Version: "1.0.0"},
		Tools: []pdk.OwnedTool{
			apply("calc_add", "Add value to the running total.", func(t, v float64) (float64, error) { return t + v, nil }),
			apply("calc_subtract", "Subtract value from the running total.", func(t, v float64) (float64, error) { return t - v, nil }),
			apply("calc_multiply", "Multiply the running total by value.", func(t, v float64) (float64, error) { return t * v, nil }),
			apply("calc_divide", "Divide the running total by value.", func(t, v float64) (float64, error) {
				if v == 0 {
					return t, errors.New("cannot divide by zero; the total is still " + format(t))
				}
				return t / v, nil
			}),
			pdk.Tool(hostabi.ToolSpec{Name: "calc_total", Description: "Return the running total (it starts at 0)."},
				func(c *pdk.Call, _ pdk.NoArgs) (string, error) { return format(total(c)), nil }, pdk.Idempotent()),
		},
	})
}

func main() { pdk.Main() }

// total reads the running total from the op's note.
func total(c *pdk.Call) float64 {
	s, _ := c.Note("total")
	t, _ := strconv.ParseFloat(s, 64)
	return t
}

func format(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
