package wasmhost

import (
	"testing"
)

// TestScanModuleFraming defends "a module that breaks the binary
// format's framing is refused before anything reads its sections", with
// the refusal each case gets.
func TestScanModuleFraming(t *testing.T) {
	head := "\x00asm\x01\x00\x00\x00"
	types := "\x01\x04\x01\x60\x00\x00" // one type: () -> ()
	cases := []struct {
		name, mod, want string
	}{
		{"not wasm", "\x7fELF\x02\x01\x01\x00", "not a valid wasm module: not a wasm binary (no \\0asm header)"},
		{"too short", "\x00asm", "not a valid wasm module: not a wasm binary (no \\0asm header)"},
		{"a component", "\x00asm\x0d\x00\x01\x00", "not a valid wasm module: wasm binary version 0d000100 is not 1"},
		{"size past the end", head + "\x01\x09\x01\x60", "not a valid wasm module: section 1 at offset 8 is truncated"},
		{"size in six bytes", head + "\x00\x80\x80\x80\x80\x80\x00", "not a valid wasm module: section 0 at offset 8 is truncated"},
		{"id without a size", head + types + "\x03", "not a valid wasm module: section 3 at offset 14 is truncated"},
		{"a section twice", head + types + types, "not a valid wasm module: section 1 is out of order or repeated"},
		{"out of order", head + "\x03\x01\x00" + types, "not a valid wasm module: section 1 is out of order or repeated"},
		{"unknown id", head + "\x0e\x00", "not a valid wasm module: unknown section id 14"},
		{"count overlong", head + "\x01\x06\x80\x80\x80\x80\x80\x00", "not a valid wasm module: section 1: LEB128 too long"},
		{"huge count", head + "\x03\x05\xff\xff\xff\xff\x0f", "module has 4294967295 functions, over the limit of 131072"},
		{"count past the body", head + types + "\x03\x02\x05\x00", "not a valid wasm module: section 3: unexpected end"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scanModule([]byte(tc.mod))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
