// Package console is the owner's web console: plain HTML, CSS and a little
// JavaScript, embedded in the binary and served at / when a
// server.Options.Console is set to FS(). It needs no build step and loads
// nothing from anywhere but its owner. README.md beside this file says
// how it signs in and why.
package console

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the console's files, index.html at the root.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
