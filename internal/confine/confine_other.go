//go:build !linux

package confine

import (
	"errors"
	"os/exec"
)

var testLevel = -1

func level() int {
	if testLevel >= 0 {
		return testLevel
	}
	return 0
}

func describe(bool) string { return "unavailable" }

func start(cmd *exec.Cmd, p *Policy) (<-chan error, error) {
	if p != nil {
		return nil, errors.New("landlock confinement needs Linux")
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done, nil
}

func restrict(*Policy) error { return errors.New("landlock confinement needs Linux") }
