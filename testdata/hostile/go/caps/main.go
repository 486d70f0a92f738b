// Command caps is a Go guest that tries to use its capabilities (ABI 1.2)
// beyond what it was granted, for the tests of wasmhost: a bundle of three
// ops, each requesting one kind of capability.
//
//	caps-fs    requests /work and /other read-write and /ro read-only;
//	           /fs OP ARGS… does one file operation and replies "ok" or
//	           "error: …": write P TEXT, read P, mkdir P, remove P,
//	           symlink TARGET LINK, link OLD NEW, rename OLD NEW, and the
//	           raw WASI calls Go would not make with such paths (it
//	           cleans them first): rawcreate DIR REL, rawlink DIR OLD NEW,
//	           rawrename DIR OLD NEW, each relative to the directory DIR
//	           opened as a file descriptor.
//	caps-net   requests HTTP to any granted host; /http JSON hands the
//	           JSON to http_request as it is and replies with the response
//	           (read again with response when it is over 1 KiB).
//	caps-exec  requests /work read-write and any granted command; /exec
//	           JSON does the same with exec; /granted replies with what it
//	           was given.
package main

import (
	"os"
	"strings"
	"unsafe"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{
			Name:     "caps-fs",
			Commands: []string{"fs"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{
				{Path: "/work", Write: true}, {Path: "/other", Write: true}, {Path: "/ro"}}},
		},
		Command: fsCommand,
	})
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "caps-net", Commands: []string{"http"}, Capabilities: hostabi.Capabilities{HTTP: []string{"*"}}},
		Command: func(c *pdk.Call) error {
			c.Reply(raw(httpRequest, c.View.Command.Args))
			return nil
		},
	})
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "caps-exec", Commands: []string{"exec", "granted"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}}, Exec: []string{"**"}}},
		Command: func(c *pdk.Call) error {
			if c.View.Command.Name == "granted" {
				g := c.Granted()
				c.Reply(string(hostabi.AppendGranted(nil, &g)))
				return nil
			}
			c.Reply(raw(execRequest, c.View.Command.Args))
			return nil
		},
	})
}

// raw hands the request to the host as written (the kit would encode a
// well-formed one) with a small buffer, and reads a larger response with
// response.
func raw(fn func(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32, req string) string {
	buf := make([]byte, 1024)
	n := fn(ptrOf(req), uint32(len(req)), unsafe.Pointer(&buf[0]), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = response(unsafe.Pointer(&buf[0]), uint32(len(buf)))
	}
	if n < 0 {
		return "no response"
	}
	return string(buf[:n])
}

func ptrOf(s string) unsafe.Pointer {
	if s == "" {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

func dirFD(p string) (*os.File, int32, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	return f, int32(f.Fd()), nil
}

type errno uint32

func (e errno) Error() string { return "errno " + itoa(int(e)) }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func fsCommand(c *pdk.Call) error {
	args := strings.Fields(c.View.Command.Args)
	var err error
	out := "ok"
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch arg(0) {
	case "write":
		err = os.WriteFile(arg(1), []byte(arg(2)), 0o644)
	case "read":
		var b []byte
		b, err = os.ReadFile(arg(1))
		out = "ok: " + string(b)
	case "mkdir":
		err = os.Mkdir(arg(1), 0o755)
	case "remove":
		err = os.Remove(arg(1))
	case "symlink":
		err = os.Symlink(arg(1), arg(2))
	case "link":
		err = os.Link(arg(1), arg(2))
	case "rename":
		err = os.Rename(arg(1), arg(2))
	case "rawcreate":
		var f *os.File
		var fd int32
		if f, fd, err = dirFD(arg(1)); err == nil {
			defer f.Close()
			rel := arg(2)
			var nfd int32
			const oCreat, rightsWrite = 1, 1 << 6
			if e := pathOpen(fd, 0, ptrOf(rel), uint32(len(rel)), oCreat, rightsWrite, 0, 0, unsafe.Pointer(&nfd)); e != 0 {
				err = errno(e)
			} else {
				data := []byte("ESCAPED")
				iov := [2]uint32{uint32(uintptr(unsafe.Pointer(&data[0]))), uint32(len(data))}
				var n uint32
				if e := fdWrite(nfd, unsafe.Pointer(&iov), 1, unsafe.Pointer(&n)); e != 0 {
					err = errno(e)
				}
			}
		}
	case "rawlink", "rawrename":
		var f *os.File
		var fd int32
		if f, fd, err = dirFD(arg(1)); err == nil {
			defer f.Close()
			from, to := arg(2), arg(3)
			var e uint32
			if arg(0) == "rawlink" {
				e = pathLink(fd, 0, ptrOf(from), uint32(len(from)), fd, ptrOf(to), uint32(len(to)))
			} else {
				e = pathRename(fd, ptrOf(from), uint32(len(from)), fd, ptrOf(to), uint32(len(to)))
			}
			if e != 0 {
				err = errno(e)
			}
		}
	default:
		out = "unknown fs command " + arg(0)
	}
	if err != nil {
		out = "error: " + err.Error()
	}
	c.Reply(out)
	return nil
}

func main() { pdk.Main() }
