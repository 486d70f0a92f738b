//go:build unix

package rootfs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// Issue 27, item 4: a FIFO in a mount (a command run in it can make one)
// hung the host. read_file opened it, the open waited for a writer, for
// good (718 s observed): the call's deadline never fired, and SIGTERM and
// SIGINT were ignored. These tests defend the promises that replaced it.

// fakeCall is a Call the test closes by hand, and that records what the FS
// told it.
type fakeCall struct {
	done    chan struct{}
	mu      sync.Mutex
	stopped int
	refused []string
}

func newFakeCall() *fakeCall { return &fakeCall{done: make(chan struct{})} }

func (c *fakeCall) Done() <-chan struct{} { return c.done }

func (c *fakeCall) Stopped() {
	c.mu.Lock()
	c.stopped++
	c.mu.Unlock()
}

func (c *fakeCall) Refused(name, what string) {
	c.mu.Lock()
	c.refused = append(c.refused, name+": "+what)
	c.mu.Unlock()
}

func (c *fakeCall) lastRefused() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.refused) == 0 {
		return ""
	}
	return c.refused[len(c.refused)-1]
}

// mountOf returns a read-write FS over a new folder, with a bound that
// never closes unless the test closes it.
func mountOf(t *testing.T) (string, experimentalsys.FS, *fakeCall) {
	t.Helper()
	dir, m := newMount(t)
	call := newFakeCall()
	return dir, m.FS(true, call), call
}

// ways are the two ways a Mount opens a name: below its directory with
// openat2 (Linux, a local file system, no mount point on the way), and
// through the Root, bounded (everywhere else; a hook forces it).
var ways = []struct {
	name  string
	force func(t *testing.T)
}{
	{"beneath", func(*testing.T) {}},
	{"root", func(t *testing.T) {
		SetOpenHook(func(string) {})
		t.Cleanup(func() { SetOpenHook(nil) })
	}},
}

func newMount(t *testing.T) (string, *Mount) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMount(root)
	t.Cleanup(func() { m.Close() })
	return dir, m
}

// special is one of the hostile fixtures: a file a guest must never wait
// on or reach through, made in the mount at test time (git keeps none of
// them).
type special struct {
	name, kind string
	make       func(t *testing.T, p string) error
}

// specials are what a command in a mount can leave there: a FIFO
// (mkfifo), a unix socket someone listens on, and, where the test may
// make one (root, or CAP_MKNOD), a character device node of /dev/null's
// kind.
var specials = []special{
	{"x.fifo", "a named pipe (FIFO)", func(t *testing.T, p string) error { return syscall.Mkfifo(p, 0o644) }},
	{"x.sock", "a socket", func(t *testing.T, p string) error {
		l, err := net.Listen("unix", p)
		if err == nil {
			t.Cleanup(func() { l.Close() })
		}
		return err
	}},
	{"x.null", "a character device", func(t *testing.T, p string) error {
		var st syscall.Stat_t
		if err := syscall.Stat("/dev/null", &st); err != nil {
			t.Skipf("no /dev/null to copy the device numbers of: %v", err)
		}
		err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(st.Rdev))
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("making a device node is not permitted here (needs root or CAP_MKNOD): %v; the FIFO and socket cases still run", err)
		}
		return err
	}},
}

// promptly runs fn and fails the test if it has not returned after
// limit: a watchdog for "never blocks", not a synchronisation (fn's
// return is the event waited for). On failure unblock runs, to release
// what fn is stuck in.
func promptly(t *testing.T, what string, limit time.Duration, fn, unblock func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("%s is still blocked after %v", what, limit)
	}
}

// releaseFIFO opens both ends of the FIFO at p without waiting, which lets
// an open stuck on the other end go on.
func releaseFIFO(p string) {
	for _, fl := range []int{os.O_RDONLY, os.O_WRONLY} {
		if f, err := os.OpenFile(p, fl|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
	}
}

// A FIFO, a socket or a device node in a mount is refused at once, for
// reading and for writing, with ENOTSUP, and the call is told what it is.
func TestOpenRefusesWhatIsNotAFileOrDirectory(t *testing.T) {
	flags := []openCase{
		{"read", experimentalsys.O_RDONLY},
		{"write", experimentalsys.O_WRONLY},
		{"read-write", experimentalsys.O_RDWR},
		{"create-truncate", experimentalsys.O_WRONLY | experimentalsys.O_CREAT | experimentalsys.O_TRUNC},
		{"append", experimentalsys.O_WRONLY | experimentalsys.O_APPEND},
		{"nofollow", experimentalsys.O_RDONLY | experimentalsys.O_NOFOLLOW},
	}
	for _, way := range ways {
		for _, sp := range specials {
			t.Run(way.name+"/"+sp.name, func(t *testing.T) {
				way.force(t)
				refusesAtOnce(t, sp, flags)
			})
		}
	}
}

// openCase is a way a guest opens a file, to read or to write.
type openCase struct {
	name string
	flag experimentalsys.Oflag
}

// refusesAtOnce makes sp in a new mount and opens it every way: each open
// must return at once, ENOTSUP, and tell the call what sp is.
func refusesAtOnce(t *testing.T, sp special, flags []openCase) {
	dir, fsys, call := mountOf(t)
	p := filepath.Join(dir, sp.name)
	if err := sp.make(t, p); err != nil {
		t.Fatalf("making %s: %v", sp.name, err)
	}
	for _, fl := range flags {
		var f experimentalsys.File
		var e experimentalsys.Errno
		promptly(t, "opening "+sp.name+" to "+fl.name, 10*time.Second, func() {
			f, e = fsys.OpenFile(sp.name, fl.flag, 0)
		}, func() { releaseFIFO(p) })
		if f != nil {
			f.Close()
		}
		if e != experimentalsys.ENOTSUP {
			t.Errorf("open %s to %s: errno %v, want ENOTSUP", sp.name, fl.name, e)
		}
		if got, want := call.lastRefused(), sp.name+": "+sp.kind; got != want {
			t.Errorf("open %s to %s: the call was told %q, want %q", sp.name, fl.name, got, want)
		}
	}
	// Looking at one is fine: a stat opens nothing.
	st, e := fsys.Lstat(sp.name)
	if e != 0 || st.Mode.IsRegular() || st.Mode.IsDir() {
		t.Errorf("lstat %s: %v %v", sp.name, st.Mode, e)
	}
	if call.stopped != 0 {
		t.Errorf("the call was stopped %d times; nothing waited", call.stopped)
	}
}

// A regular file and a directory still open, for reading and writing; a
// regular file is back in blocking mode once opened (O_NONBLOCK is for
// the open only), and a directory holding a FIFO still lists.
func TestRegularFileAndDirectoryStillOpen(t *testing.T) {
	dir, fsys, call := mountOf(t)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "a.txt"), []byte("hello\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "d", "x.fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, e := fsys.OpenFile("d/a.txt", experimentalsys.O_RDWR|experimentalsys.O_APPEND, 0)
	if e != 0 {
		t.Fatalf("open d/a.txt: %v", e)
	}
	rf := f.(*rootFile)
	rc, _ := rf.f.SyscallConn()
	var fl int
	var ferr error
	rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if ferr != nil || fl&unix.O_NONBLOCK != 0 || fl&unix.O_APPEND == 0 {
		t.Errorf("d/a.txt opened with flags %#x (%v): want O_APPEND and not O_NONBLOCK", fl, ferr)
	}
	if _, e := f.Write([]byte("world\n")); e != 0 {
		t.Errorf("write: %v", e)
	}
	buf := make([]byte, 64)
	n, e := f.Pread(buf, 0)
	if e != 0 || string(buf[:n]) != "hello\nworld\n" {
		t.Errorf("pread = %q, %v", buf[:n], e)
	}
	f.Close()
	nf, e := fsys.OpenFile("d/new.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o600)
	if e != 0 {
		t.Fatalf("create d/new.txt: %v", e)
	}
	nf.Write([]byte("new"))
	nf.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "d", "new.txt")); string(b) != "new" {
		t.Errorf("d/new.txt holds %q", b)
	}
	// O_EXCL on an existing FIFO says it exists, as it would for a file.
	if _, e := fsys.OpenFile("d/x.fifo", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o600); e != experimentalsys.EEXIST {
		t.Errorf("create d/x.fifo exclusively: %v, want EEXIST", e)
	}
	d, e := fsys.OpenFile("d", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		t.Fatalf("open d: %v", e)
	}
	defer d.Close()
	entries, e := d.Readdir(-1)
	var names []string
	for _, de := range entries {
		names = append(names, de.Name+":"+de.Type.String())
	}
	sort.Strings(names)
	if e != 0 || strings.Join(names, " ") != "a.txt:---------- new.txt:---------- x.fifo:p---------" {
		t.Errorf("readdir d = %v, %v", names, e)
	}
	if len(call.refused) != 0 || call.stopped != 0 {
		t.Errorf("refused %v, stopped %d: nothing should be", call.refused, call.stopped)
	}
}

// The race: a file is looked at and found regular, then a FIFO is put in
// its place before the open. Here a FIFO and a regular file swap places
// under one name while the FS opens it, for reading and for writing, over
// and over: every open returns at once, with the regular file (its own
// content) or ENOTSUP (or ENOENT, between two renames), never waiting on
// the FIFO.
func TestOpenNeverWaitsWhileAFIFOAndAFileSwap(t *testing.T) {
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			way.force(t)
			openWhileSwapping(t)
		})
	}
}

func openWhileSwapping(t *testing.T) {
	dir, fsys, _ := mountOf(t)
	at := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(at("x"), []byte("regular\n"), 0o644)
	if err := syscall.Mkfifo(at("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// x: the file, then nothing, then the FIFO, then nothing.
			os.Rename(at("x"), at("file"))
			os.Rename(at("fifo"), at("x"))
			os.Rename(at("x"), at("fifo"))
			os.Rename(at("file"), at("x"))
		}
	}()
	defer func() {
		close(stop)
		<-swapped
	}()
	var files, refused, absent int
	promptly(t, "an open while a FIFO and a file swap", 60*time.Second, func() {
		buf := make([]byte, 16)
		for i := 0; i < 200000 && (i < 2000 || files < 50 || refused < 50); i++ {
			flag := experimentalsys.O_RDONLY
			if i%2 == 1 {
				flag = experimentalsys.O_WRONLY
			}
			f, e := fsys.OpenFile("x", flag, 0)
			switch e {
			case 0:
				files++
				if flag == experimentalsys.O_RDONLY {
					n, e := f.Read(buf)
					if e != 0 || string(buf[:n]) != "regular\n" {
						t.Errorf("read x = %q, %v", buf[:n], e)
					}
				}
				if st, _ := f.Stat(); !st.Mode.IsRegular() {
					t.Errorf("open x gave a %v", st.Mode)
				}
				f.Close()
			case experimentalsys.ENOTSUP:
				refused++
			case experimentalsys.ENOENT:
				absent++
			default:
				t.Errorf("open x: %v", e)
			}
		}
	}, func() {
		releaseFIFO(at("x"))
		releaseFIFO(at("fifo"))
	})
	t.Logf("%d opens of the file, %d refusals of the FIFO, %d between", files, refused, absent)
	if files == 0 || refused == 0 {
		t.Errorf("the race was not exercised: %d opens of the file, %d of the FIFO refused", files, refused)
	}
}

// A host call that blocks (a hung network file system, say) waits only as
// long as its call may: when the call's Done closes, the guest gets EIO at
// once and the call is told it was stopped; the host call finishes on its
// own later, and what it opened is closed then.
func TestBlockedHostCallIsLeftAtTheDeadline(t *testing.T) {
	dir, fsys, call := mountOf(t)
	os.WriteFile(filepath.Join(dir, "slow.txt"), []byte("x"), 0o644)
	entered := make(chan struct{})
	release := make(chan struct{})
	SetOpenHook(func(name string) {
		if name == "slow.txt" {
			close(entered)
			<-release
		}
	})
	defer SetOpenHook(nil)
	var e experimentalsys.Errno
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		_, e = fsys.OpenFile("slow.txt", experimentalsys.O_RDONLY, 0)
	}()
	<-entered
	close(call.done) // the deadline passes while the open is stuck
	<-opened
	if e != experimentalsys.EIO || call.stopped != 1 {
		t.Errorf("open past the deadline: errno %v, stopped %d; want EIO, 1", e, call.stopped)
	}
	// Any host call after the deadline is refused without being made.
	if _, e := fsys.Stat("slow.txt"); e != experimentalsys.EIO || call.stopped != 2 {
		t.Errorf("stat after the deadline: errno %v, stopped %d; want EIO, 2", e, call.stopped)
	}
	close(release)
}

// bounded hands back what a host call got when it finishes in time, and
// undoes it (closes the file) when the call had stopped waiting.
func TestBoundedUndoesWhatArrivesLate(t *testing.T) {
	call := newFakeCall()
	v, e := bounded(call, func() (int, experimentalsys.Errno) { return 7, 0 }, func(int) { t.Error("undo of a delivered result") })
	if v != 7 || e != 0 {
		t.Errorf("bounded = %d, %v", v, e)
	}
	release := make(chan struct{})
	undone := make(chan int, 1)
	started := make(chan struct{})
	go func() {
		<-started
		close(call.done)
	}()
	v, e = bounded(call, func() (int, experimentalsys.Errno) {
		close(started)
		<-release
		return 8, 0
	}, func(v int) { undone <- v })
	if v != 0 || e != experimentalsys.EIO {
		t.Errorf("bounded past Done = %d, %v; want 0, EIO", v, e)
	}
	close(release)
	if got := <-undone; got != 8 {
		t.Errorf("undone %d, want 8", got)
	}
}

// Opening below the directory (openat2) opens what the Root opens, and
// nothing it refuses: a table of hostile names, each opened both ways.
func TestBeneathOpensWhatTheRootOpens(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "m"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside, filepath.Join(dir, "sub")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("SECRET"), 0o644)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "inner.txt"), []byte("inner"), 0o644)
	for link, target := range map[string]string{
		"link_in": "hello.txt", "sub/link_up": "../hello.txt", "link_sub": "sub",
		"link_abs": filepath.Join(outside, "secret.txt"), "link_rel": "../outside/secret.txt",
		"link_dir": outside, "sub/link_far": "../../outside/secret.txt",
		"loop_a": "loop_b", "loop_b": "loop_a", "link_proc": "/proc/self/root/etc/hostname",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMount(root)
	defer m.Close()
	fsys := m.FS(false, nil)
	open := func(name string, flag experimentalsys.Oflag) string {
		f, e := fsys.OpenFile(name, flag, 0)
		if e != 0 {
			return "error " + e.Error()
		}
		defer f.Close()
		buf := make([]byte, 64)
		n, _ := f.Read(buf)
		return "ok " + string(buf[:n])
	}
	for _, name := range []string{
		"hello.txt", "sub/inner.txt", "sub/../hello.txt", "./sub//inner.txt", "link_in", "sub/link_up", "link_sub/inner.txt",
		"link_abs", "link_rel", "link_dir/secret.txt", "sub/link_far", "loop_a", "link_proc",
		"../outside/secret.txt", "sub/../../outside/secret.txt", "/../outside/secret.txt", "nope", "hello.txt/x",
	} {
		for _, flag := range []experimentalsys.Oflag{experimentalsys.O_RDONLY, experimentalsys.O_RDONLY | experimentalsys.O_NOFOLLOW} {
			beneath := open(name, flag)
			SetOpenHook(func(string) {})
			viaRoot := open(name, flag)
			SetOpenHook(nil)
			if beneath != viaRoot || strings.Contains(beneath, "SECRET") {
				t.Errorf("open %s (flags %#x): %q below the directory, %q through the Root", name, flag, beneath, viaRoot)
			}
		}
	}
	if m.dir == nil {
		t.Logf("this system's temporary folder is not on a local file system: only the Root's way was tried")
	}
}

// A mount point inside the mount (a tmpfs here; an sshfs or NFS one is
// what it stands for) is not crossed below the directory: the open goes
// through the Root, bounded, and still opens the file.
func TestOpenThroughAMountPointInside(t *testing.T) {
	dir, fsys, _ := mountOf(t)
	inner := filepath.Join(dir, "mnt")
	os.Mkdir(inner, 0o755)
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a tmpfs inside the mount is not permitted here (needs CAP_SYS_ADMIN): %v", err)
	}
	defer unix.Unmount(inner, unix.MNT_DETACH)
	os.WriteFile(filepath.Join(inner, "x.txt"), []byte("across"), 0o644)
	f, e := fsys.OpenFile("mnt/x.txt", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatalf("open mnt/x.txt: %v", e)
	}
	defer f.Close()
	buf := make([]byte, 16)
	if n, e := f.Read(buf); e != 0 || string(buf[:n]) != "across" {
		t.Errorf("read mnt/x.txt = %q, %v", buf[:n], e)
	}
	if m := fsys.(*rootFS).m; m.dir != nil {
		if _, _, ok := m.openBeneath("mnt/x.txt", unix.O_RDONLY|unix.O_NONBLOCK, 0); ok {
			t.Errorf("openat2 crossed the mount point")
		}
	}
}
