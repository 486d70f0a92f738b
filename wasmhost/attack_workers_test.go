package wasmhost

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// Compilation workers on modules with fewer functions than workers (none,
// one, two), and functions without bodies worth speaking of: compile and
// run as with one worker.
func TestAttackCompileWorkersTinyModules(t *testing.T) {
	ctx := context.Background()
	sec := func(out []byte, id byte, body []byte) []byte {
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(body)))
		return append(out, body...)
	}
	for nf := 0; nf <= 5; nf++ {
		mod := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
		mod = sec(mod, 1, []byte{1, 0x60, 0, 1, 0x7f}) // () -> i32
		mod = sec(mod, 3, append(wasmbin.AppendU32(nil, uint32(nf)), make([]byte, nf)...))
		mod = sec(mod, 5, []byte{1, 0, 1})
		exp := []byte{byte(1 + min(nf, 1))}
		exp = append(exp, 3, 'm', 'e', 'm', 2, 0)
		if nf > 0 {
			exp = append(exp, 1, 'f', 0, byte(nf-1))
		}
		mod = sec(mod, 7, exp)
		code := wasmbin.AppendU32(nil, uint32(nf))
		for i := 0; i < nf; i++ {
			code = append(code, 4, 0, 0x41, byte(i), 0x0b) // i32.const i
		}
		mod = sec(mod, 10, code)
		for _, workers := range []int{1, 2, 8, 64} {
			for _, cfg := range []wazero.RuntimeConfig{wazero.NewRuntimeConfigCompiler(), wazero.NewRuntimeConfigInterpreter()} {
				r := wazero.NewRuntimeWithConfig(ctx, cfg)
				cm, err := r.CompileModule(experimental.WithCompilationWorkers(ctx, workers), mod)
				if err != nil {
					t.Fatalf("%d functions, %d workers: %v", nf, workers, err)
				}
				m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
				if err != nil {
					t.Fatalf("%d functions, %d workers: instantiate %v", nf, workers, err)
				}
				if nf > 0 {
					res, err := m.ExportedFunction("f").Call(ctx)
					if err != nil || res[0] != uint64(nf-1) {
						t.Fatalf("%d functions, %d workers: f() = %v, %v", nf, workers, res, err)
					}
				}
				r.Close(ctx)
			}
		}
	}
}
