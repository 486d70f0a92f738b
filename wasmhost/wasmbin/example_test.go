package wasmbin_test

import (
	"fmt"

	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// A module is read section by section; a custom section is written back
// with AppendCustomSection, the others as they were.
func Example() {
	mod := []byte(wasmbin.Magic + wasmbin.Version1)
	mod = wasmbin.AppendSection(mod, wasmbin.IDImport, []byte("\x01\x04wasi\x05fd_wr\x00\x00"))
	mod = wasmbin.AppendCustomSection(mod, "wagent.manifest", []byte(`{"name":"ping"}`))

	for s, err := range wasmbin.Sections(mod) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if name, payload, ok := s.Custom(); ok {
			fmt.Printf("custom section %s: %s\n", name, payload)
			continue
		}
		if s.ID == wasmbin.IDImport {
			r := wasmbin.NewReader(s.Body)
			for n := r.Count(4); n > 0 && r.Err() == nil; n-- {
				imp := r.Import()
				fmt.Printf("import %s.%s, kind %d, type %d\n", imp.Module, imp.Name, imp.Kind, imp.Type)
			}
		}
	}
	// Output:
	// import wasi.fd_wr, kind 0, type 0
	// custom section wagent.manifest: {"name":"ping"}
}
