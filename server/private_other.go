//go:build !unix

package server

// checkPrivate has nothing to check where there are no Unix permissions.
func checkPrivate(dir string) error { return nil }
