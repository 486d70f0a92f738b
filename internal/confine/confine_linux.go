//go:build linux

package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// testLevel, when set, replaces the kernel's answer (tests of the refusal
// on kernels without Landlock).
var testLevel = -1

var detect = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
})

func level() int {
	if testLevel >= 0 {
		return testLevel
	}
	return detect()
}

func describe(network bool) string {
	v := level()
	if v < MinLevel {
		return "unavailable"
	}
	what := []string{"files"}
	if !network && v >= 4 {
		what = append(what, "tcp")
		if v >= 10 {
			what = append(what, "udp")
		}
	}
	if v >= 6 {
		what = append(what, "signals")
	}
	if v >= 9 {
		what = append(what, "unix sockets")
	}
	return fmt.Sprintf("landlock v%d: %s", v, strings.Join(what, ", "))
}

func start(cmd *exec.Cmd, p *Policy) (<-chan error, error) {
	fd := -1
	var flags uint32
	if p != nil {
		if v := level(); v < MinLevel {
			return nil, fmt.Errorf("landlock is not available (kernel ABI %d, confinement needs %d or later)", v, MinLevel)
		}
		var err error
		fd, flags, err = ruleset(p)
		if err != nil {
			return nil, err
		}
		if fd < 0 {
			return nil, errors.New("landlock restricted nothing (not enabled in this kernel?)")
		}
		defer unix.Close(fd) // needed only until the thread restricted itself
	}
	done := make(chan error, 1)
	if p == nil {
		// Not confined: no thread of its own is needed. The Go runtime
		// never ends a thread that is not locked, so Pdeathsig still
		// means the process's death.
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		go func() { done <- cmd.Wait() }()
		return done, nil
	}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns, the Go runtime
		// ends the thread, and its Landlock domain with it.
		runtime.LockOSThread()
		if err := restrictThread(fd, flags); err != nil {
			started <- err
			return
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

func restrictThread(fd int, flags uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

func restrict(p *Policy) error {
	if v := level(); v < MinLevel {
		return fmt.Errorf("landlock is not available (kernel ABI %d, confinement needs %d or later)", v, MinLevel)
	}
	fd, flags, err := ruleset(p)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("landlock restricted nothing (not enabled in this kernel?)")
	}
	defer unix.Close(fd)
	return restrictThread(fd, flags)
}

// ruleset builds the Landlock ruleset of p: the access rights of the
// newest ABI this package knows, lowered to the kernel's.
func ruleset(p *Policy) (int, uint32, error) {
	cfg := landlock.V11
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	cfg = cfg.BestEffort()
	var roDirs, roFiles, rwDirs, rwFiles []string
	split := func(paths []string, dirs, files *[]string) error {
		for _, path := range paths {
			st, err := os.Stat(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if st.IsDir() {
				*dirs = append(*dirs, path)
			} else {
				*files = append(*files, path)
			}
		}
		return nil
	}
	if err := split(p.Read, &roDirs, &roFiles); err != nil {
		return -1, 0, err
	}
	if err := split(p.Write, &rwDirs, &rwFiles); err != nil {
		return -1, 0, err
	}
	var rules []landlock.Rule
	if len(roDirs) > 0 {
		rules = append(rules, landlock.RODirs(roDirs...).IgnoreIfMissing())
	}
	if len(roFiles) > 0 {
		rules = append(rules, landlock.ROFiles(roFiles...).IgnoreIfMissing())
	}
	if len(rwDirs) > 0 {
		// Moving files between directories of a writable tree needs
		// "refer" (both ends must have it, so nothing moves out).
		rules = append(rules, landlock.RWDirs(rwDirs...).WithRefer().IgnoreIfMissing())
	}
	if len(rwFiles) > 0 {
		rules = append(rules, landlock.RWFiles(rwFiles...).IgnoreIfMissing())
	}
	return cfg.NewRulesetFD(rules...)
}
