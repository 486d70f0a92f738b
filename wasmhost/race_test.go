//go:build race

package wasmhost

const raceEnabled = true
