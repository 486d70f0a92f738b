package main

import (
	"errors"
	"fmt"

	"github.com/wagent/wagent/hostabi"
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

type wreader struct {
	b []byte
	i int
}

func (r *wreader) u32() (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		if r.i >= len(r.b) {
			return 0, errTruncated
		}
		c := r.b[r.i]
		r.i++
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("malformed module: an integer is too long")
}

func (r *wreader) bytes(n uint32) ([]byte, error) {
	if uint64(r.i)+uint64(n) > uint64(len(r.b)) {
		return nil, errTruncated
	}
	b := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return b, nil
}

func (r *wreader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	return string(b), err
}

// readWasmInfo walks the sections of a module. It reads only what it
// shows; the host validates the module before anything runs it.
func readWasmInfo(b []byte) (wasmInfo, error) {
	var info wasmInfo
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return info, errors.New("not a wasm module (no \\0asm header)")
	}
	r := &wreader{b: b, i: 8}
	for r.i < len(b) {
		id := b[r.i]
		r.i++
		size, err := r.u32()
		if err != nil {
			return info, err
		}
		body, err := r.bytes(size)
		if err != nil {
			return info, err
		}
		s := &wreader{b: body}
		switch id {
		case 0: // custom
			name, err := s.name()
			if err != nil {
				return info, err
			}
			switch name {
			case "producers":
				if info.producers, err = readProducers(s); err != nil {
					return info, fmt.Errorf("producers section: %v", err)
				}
			case hostabi.ManifestSection:
				info.manifest = body[s.i:]
			}
		case 2: // imports
			n, err := s.u32()
			if err != nil {
				return info, err
			}
			for j := uint32(0); j < n && j < 4096; j++ {
				mod, err := s.name()
				if err != nil {
					return info, err
				}
				fn, err := s.name()
				if err != nil {
					return info, err
				}
				info.imports = append(info.imports, mod+"."+fn)
				if err := skipImportDesc(s); err != nil {
					return info, err
				}
			}
		case 5: // memory
			n, err := s.u32()
			if err == nil && n > 0 {
				if _, err = s.u32(); err == nil { // flags
					info.memMin, err = s.u32()
				}
			}
			if err != nil {
				return info, err
			}
		}
	}
	return info, nil
}

func skipImportDesc(s *wreader) error {
	if s.i >= len(s.b) {
		return errTruncated
	}
	kind := s.b[s.i]
	s.i++
	switch kind {
	case 0: // a function: its type index
		_, err := s.u32()
		return err
	case 1: // a table: reftype, limits
		s.i++
		return skipLimits(s)
	case 2: // a memory
		return skipLimits(s)
	case 3: // a global: valtype, mutability
		s.i += 2
		return nil
	case 4: // a tag
		s.i++
		_, err := s.u32()
		return err
	}
	return fmt.Errorf("malformed module: import kind %d", kind)
}

func skipLimits(s *wreader) error {
	flags, err := s.u32()
	if err != nil {
		return err
	}
	if _, err := s.u32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = s.u32()
	}
	return err
}

func readProducers(s *wreader) ([]producerField, error) {
	n, err := s.u32()
	if err != nil {
		return nil, err
	}
	var out []producerField
	for i := uint32(0); i < n && i < 64; i++ {
		field, err := s.name()
		if err != nil {
			return nil, err
		}
		m, err := s.u32()
		if err != nil {
			return nil, err
		}
		f := producerField{Field: field}
		for j := uint32(0); j < m && j < 64; j++ {
			name, err := s.name()
			if err != nil {
				return nil, err
			}
			version, err := s.name()
			if err != nil {
				return nil, err
			}
			f.Values = append(f.Values, producerValue{name, version})
		}
		out = append(out, f)
	}
	return out, nil
}
