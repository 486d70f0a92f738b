package rootfs

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A guest builds a link whose target looks inside when joined to the
// link's path as written, but the path runs through a link the guest made
// first ("d" -> "."), so the new link lands higher than it appears and its
// target points out of the mount, for whatever follows links on the host
// (a granted command, the user's editor). Refused; nothing is created.
func TestSymlinkThroughOwnLinkStaysInside(t *testing.T) {
	base := t.TempDir()
	mount := filepath.Join(base, "mount")
	os.Mkdir(mount, 0o755)
	root, err := os.OpenRoot(mount)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMount(root)
	defer m.Close()
	fsys := m.FS(true, nil)
	if e := fsys.Symlink(".", "d"); e != 0 {
		t.Fatalf("symlink d -> .: %v", e)
	}
	if e := fsys.Symlink("../../..", "d/d/d/l"); e != experimentalsys.EPERM {
		t.Fatalf("symlink d/d/d/l -> ../../..: errno %v, want EPERM", e)
	}
	if _, err := os.Lstat(filepath.Join(mount, "l")); !os.IsNotExist(err) {
		t.Fatalf("a link was created at the mount's top: %v", err)
	}
	// A link that climbs, even one that stays inside where it is made,
	// would climb out once renamed to the top: refused too.
	os.Mkdir(filepath.Join(mount, "sub"), 0o755)
	if e := fsys.Symlink("../d", "sub/back"); e != experimentalsys.EPERM {
		t.Fatalf("symlink sub/back -> ../d: errno %v, want EPERM", e)
	}
	// A link going down still works.
	if e := fsys.Symlink("sub", "down"); e != 0 {
		t.Fatalf("symlink down -> sub: %v", e)
	}
}
