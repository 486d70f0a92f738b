// Command hostile is a Go guest that misbehaves on command, for the tests
// that need the Go runtime rather than hand-written WAT:
//
//	/panic  its handler panics (trap: the Go runtime prints the panic and
//	        exits with code 2)
//	/hog    it allocates without bound (memory: the host refuses to grow
//	        its memory past the op's limit)
//	/peek   it reads files inside and outside what it was granted and
//	        replies with what each read gave. It requests the mounts
//	        /skills and /secrets; the test grants them and /extra, which
//	        it does not request.
//	/read P replies with the text of the file at path P, or the error
//	/list P replies with the names in the directory at path P, or the error
//	/spin   it loops forever in Go code (timeout)
//	/env    it replies with what it can see of the world: the year of its
//	        clock, its arguments and environment, and two random bytes,
//	        so the test can check they are fake and deterministic
package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{
			Name:         "hostile",
			Commands:     []string{"panic", "hog", "peek", "read", "list", "spin", "env"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/skills"}, {Path: "/secrets"}}},
		},
		Command: command,
	})
}

var hoard [][]byte

func command(c *pdk.Call) error {
	switch c.View.Command.Name {
	case "panic":
		panic("boom")
	case "hog":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "spin":
		n := 0
		for n >= 0 {
			n = (n + 1) % 1000
		}
		return nil
	case "env":
		var r [2]byte
		rand.Read(r[:])
		c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: fmt.Sprintf("year=%d args=%d env=%d rand=%x", time.Now().Year(), len(os.Args), len(os.Environ()), r)})
	case "read":
		b, err := os.ReadFile(c.View.Command.Args)
		if err != nil {
			c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: "error: " + err.Error()})
			return nil
		}
		c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: "ok: " + strings.TrimSpace(string(b))})
	case "list":
		entries, err := os.ReadDir(c.View.Command.Args)
		if err != nil {
			c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: "error: " + err.Error()})
			return nil
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: "ok: " + strings.Join(names, " ")})
	case "peek":
		var out []string
		for _, p := range []string{"/skills/hello.txt", "/secrets/key.txt", "/extra/key.txt", "/etc/passwd", "/skills/../../etc/passwd", "../etc/passwd"} {
			b, err := os.ReadFile(p)
			if err != nil {
				out = append(out, p+": error")
				continue
			}
			out = append(out, p+": "+strings.TrimSpace(string(b)))
		}
		c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: strings.Join(out, "\n")})
	}
	return nil
}

func main() { pdk.Main() }
