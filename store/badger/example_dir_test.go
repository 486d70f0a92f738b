package badger_test

import "os"

// exampleDir makes a temporary directory for an example (examples get no
// testing.T to ask for one).
func exampleDir() (string, func()) {
	dir, err := os.MkdirTemp("", "wagent-store-example-")
	if err != nil {
		panic(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}
