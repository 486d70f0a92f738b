package procbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBoxKeepsNoOwnerDescriptor: a descriptor the owner holds without
// close-on-exec (inherited from whoever started it: a shell's 7<secret, a
// service manager's socket) does not reach the command.
func TestBoxKeepsNoOwnerDescriptor(t *testing.T) {
	needBox(t)
	secret := filepath.Join(t.TempDir(), "owner-descriptor-secret")
	if err := os.WriteFile(secret, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC, as inherited
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	st, out, errs := runBox(t, shell(t, fmt.Sprintf(`ls -l /proc/$$/fd; cat <&%d`, fd)))
	if strings.Contains(out, "owner-descriptor-secret") || strings.Contains(out, "planted") {
		t.Fatalf("the owner's descriptor %d reached the command (%v):\n%s%s", fd, st, out, errs)
	}
}

// TestBoxHandsOnNoCapability: in a user namespace the init had
// CAP_SYS_ADMIN to mount /proc. None of it may reach the command, not even
// in its inheritable set: a program whose file capabilities name
// cap_sys_admin as inheritable (harmless on the host, where no process
// has it inheritable) would otherwise run with it in the box's user
// namespace, unmount the box's /proc and see the host's.
func TestBoxHandsOnNoCapability(t *testing.T) {
	needBox(t)
	st, out, errs := runBox(t, shell(t, `grep ^Cap /proc/self/status`))
	if os.Geteuid() == 0 {
		t.Skip("root's command is root: the unprivileged run of this test is the one that counts")
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] != "CapBnd:" && strings.Trim(f[1], "0") != "" {
			t.Errorf("the command holds a capability: %s (%v, %s)\n%s", l, st, errs, out)
		}
	}
}
