package ops

import (
	"errors"
	"fmt"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// Reading a module's sections without compiling it, for ops inspect.

// wasmInfo is what inspect reads from a module's bytes itself: the
// producers section (the toolchain, if the module records it), the
// memory's initial size, the imports, and the manifest section's bytes.
type wasmInfo struct {
	producers []producerField
	memMin    uint32
	imports   []string
	manifest  []byte
}

// producerField is one field of the producers section (tool conventions'
// "language", "processed-by", "sdk") with its names and versions.
type producerField struct {
	Field  string          `json:"field"`
	Values []producerValue `json:"values"`
}

type producerValue struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

var errTruncated = errors.New("malformed module: a section runs past the end")

// malformed words an error of the wasm reader for inspect.
func malformed(err error) error {
	switch {
	case errors.Is(err, wasmbin.ErrMagic):
		return errors.New("not a wasm module (no \\0asm header)")
	case errors.Is(err, wasmbin.ErrTooLong), errors.Is(err, wasmbin.ErrOverflow):
		return errors.New("malformed module: an integer is too long")
	}
	return errTruncated
}

// readWasmInfo walks the sections of a module. It reads only what it
// shows; the host validates the module before anything runs it.
func readWasmInfo(b []byte) (wasmInfo, error) {
	var info wasmInfo
	for sec, err := range wasmbin.Sections(b) {
		if err != nil {
			return info, malformed(err)
		}
		r := wasmbin.NewReader(sec.Body)
		switch sec.ID {
		case wasmbin.IDCustom:
			name := r.Name()
			if r.Err() != nil {
				return info, malformed(r.Err())
			}
			switch name {
			case "producers":
				if info.producers, err = readProducers(r); err != nil {
					return info, fmt.Errorf("producers section: %v", err)
				}
			case hostabi.ManifestSection:
				info.manifest = r.Rest()
			}
		case wasmbin.IDImport:
			n := r.U32()
			for j := uint32(0); j < n && j < 4096 && r.Err() == nil; j++ {
				imp := r.Import()
				if errors.Is(r.Err(), wasmbin.ErrImportKind) {
					return info, fmt.Errorf("malformed module: import kind %d", imp.Kind)
				}
				info.imports = append(info.imports, imp.Module+"."+imp.Name)
			}
		case wasmbin.IDMemory:
			if n := r.U32(); n > 0 {
				r.U32() // flags
				info.memMin = r.U32()
			}
		}
		if r.Err() != nil {
			return info, malformed(r.Err())
		}
	}
	return info, nil
}

func readProducers(r *wasmbin.Reader) ([]producerField, error) {
	n := r.U32()
	var out []producerField
	for i := uint32(0); i < n && i < 64 && r.Err() == nil; i++ {
		f := producerField{Field: r.Name()}
		m := r.U32()
		for j := uint32(0); j < m && j < 64 && r.Err() == nil; j++ {
			name, version := r.Name(), r.Name()
			f.Values = append(f.Values, producerValue{name, version})
		}
		out = append(out, f)
	}
	if r.Err() != nil {
		return nil, malformed(r.Err())
	}
	return out, nil
}
