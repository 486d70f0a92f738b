//go:build !linux

package procbox

import (
	"errors"
	"runtime"
	"syscall"
)

// nsBox needs Linux's namespaces; Probe never reports a whole box here,
// so Start never uses it.
type nsBox struct{}

func (*nsBox) start(*Cmd) error { return errors.New("process boxes need Linux") }
func (*nsBox) wait() (State, error) {
	return State{ExitCode: -1}, errors.New("process boxes need Linux")
}
func (*nsBox) kill()                 {}
func (*nsBox) signal(syscall.Signal) {}
func (*nsBox) pid() int              { return 0 }

func probe() Enforcement {
	return Enforcement{Missing: []string{
		"processes a command starts can outlive it: no process box on " + runtime.GOOS + " (it needs Linux's PID namespaces)",
		"commands see the owner's processes",
	}}
}
