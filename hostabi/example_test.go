package hostabi_test

import (
	"fmt"

	"github.com/wagent/wagent/hostabi"
)

// A guest hands its effects over as a JSON array; the host decodes and
// checks them at the hook it asked.
func ExampleParseEffects() {
	out := []byte(`[{"kind":"decision","call_id":"c1","allow":true,"scope":"once"},{"kind":"steer","text":"go on"}]`)
	effects, err := hostabi.ParseEffects(nil, out)
	if err != nil {
		panic(err)
	}
	for _, e := range effects {
		fmt.Println(e.Kind, e.Check(hostabi.HookTool))
	}
	// Output:
	// decision <nil>
	// steer invalid effect: kind "steer" is not allowed at hook "tool"
}

// An op reads one value of its config without a reflection-based decoder.
func ExampleField() {
	config := []byte(`{"mode":"ask","allow":["calc_total","read_file"]}`)
	raw, _ := hostabi.Field(config, "allow")
	allow, _ := hostabi.Strings(raw)
	fmt.Println(allow)
	// Output: [calc_total read_file]
}

// The names a module exports and imports are derived from the hook and the
// ABI major.
func ExampleHookExport() {
	fmt.Println(hostabi.Marker(hostabi.Major), hostabi.HookExport(hostabi.HookTurnStopping))
	// Output: wagent_abi_v1 wagent_on_turn_stopping
}
