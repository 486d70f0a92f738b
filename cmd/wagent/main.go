// Command wagent runs agents from the terminal: start or continue a
// session with a pipeline of operations, answer approvals from another
// shell, read what happened.
//
// The contract scripts rely on (names, flags, exit codes) is in README.md,
// "The CLI": exit 0 done, 1 failure, 2 usage, 3 waiting for a person.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the whole CLI, testable in-process.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, os.Stdin, stdout, stderr, os.Getenv)
}
