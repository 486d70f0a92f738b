package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// mountTree makes a granted folder full of ways out of it, next to a
// folder that must stay out of reach:
//
//	outside/secret.txt           "SECRET"
//	mount/hello.txt              "hello"
//	mount/sub/inner.txt          "inner"
//	mount/link_in -> hello.txt   (stays inside: allowed)
//	mount/sub/link_up -> ../hello.txt (stays inside: allowed)
//	mount/link_abs -> /…/outside/secret.txt
//	mount/link_rel -> ../outside/secret.txt
//	mount/link_dir -> /…/outside
//	mount/sub/link_far -> ../../outside/secret.txt
//	mount/loop_a -> loop_b, mount/loop_b -> loop_a
//	mount/skill/SKILL.md -> /…/outside/secret.txt
func mountTree(t *testing.T) (mount, outside string) {
	t.Helper()
	base := t.TempDir()
	outside, mount = filepath.Join(base, "outside"), filepath.Join(base, "mount")
	for _, d := range []string{outside, mount, filepath.Join(mount, "sub"), filepath.Join(mount, "skill")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret.txt"), "SECRET")
	write(filepath.Join(mount, "hello.txt"), "hello")
	write(filepath.Join(mount, "sub", "inner.txt"), "inner")
	for link, target := range map[string]string{
		"link_in":        "hello.txt",
		"sub/link_up":    "../hello.txt",
		"link_abs":       filepath.Join(outside, "secret.txt"),
		"link_rel":       "../outside/secret.txt",
		"link_dir":       outside,
		"sub/link_far":   "../../outside/secret.txt",
		"loop_a":         "loop_b",
		"loop_b":         "loop_a",
		"skill/SKILL.md": filepath.Join(outside, "secret.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(mount, link)); err != nil {
			t.Fatal(err)
		}
	}
	return mount, outside
}

// A read-only mount is confined like os.Root: no symbolic link and no ..
// leads out of it, whichever way the guest asks (a table of hostile
// paths, in the manner of testing/fstest).
func TestHostileMounts(t *testing.T) {
	mount, _ := mountTree(t)
	op := newOp(t, load(t, "testdata/hostile/go_hostile.wasm"), Config{
		Limits: Limits{MemoryPages: 256, Timeout: 2 * time.Second},
		Grants: Grants{Mounts: []Mount{{HostDir: mount, GuestPath: "/skills"}, {HostDir: t.TempDir(), GuestPath: "/secrets"}}},
	})
	ask := func(cmd, arg string) string {
		t.Helper()
		v := commandView(cmd)
		v.Command.Args = arg
		eff, err := op.Handle(context.Background(), v, nil)
		if err != nil || len(eff) != 1 {
			t.Fatalf("/%s %s: %v %+v", cmd, arg, err, eff)
		}
		return eff[0].Text
	}
	for _, tc := range []struct{ path, want string }{
		{"/skills/hello.txt", "ok: hello"},
		{"/skills/sub/inner.txt", "ok: inner"},
		{"/skills/./sub//inner.txt", "ok: inner"},
		{"/skills/sub/../hello.txt", "ok: hello"},
		{"/skills/link_in", "ok: hello"},
		{"/skills/sub/link_up", "ok: hello"},
		// Out of the mount.
		{"/skills/link_abs", "error"},
		{"/skills/link_rel", "error"},
		{"/skills/link_dir/secret.txt", "error"},
		{"/skills/sub/link_far", "error"},
		{"/skills/loop_a", "error"},
		{"/skills/skill/SKILL.md", "error"},
		{"/skills/../outside/secret.txt", "error"},
		{"/skills/sub/../../outside/secret.txt", "error"},
		{"../outside/secret.txt", "error"},
		{"/etc/passwd", "error"},
	} {
		t.Run("read "+tc.path, func(t *testing.T) {
			got := ask("read", tc.path)
			if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "SECRET") {
				t.Errorf("read %s = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ path, want string }{
		{"/skills/sub", "ok: inner.txt link_far link_up"},
		{"/skills/link_dir", "error"},
		{"/skills/..", "error"},
	} {
		t.Run("list "+tc.path, func(t *testing.T) {
			if got := ask("list", tc.path); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "secret.txt") {
				t.Errorf("list %s = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

// The skills built-in reads SKILL.md files from its mount: one that is a
// link out of it does not put the linked file's text in the system prompt.
func TestSkillsMountDoesNotFollowLinksOut(t *testing.T) {
	mount, outside := mountTree(t)
	os.WriteFile(filepath.Join(outside, "leak.md"), []byte("---\nname: leak\ndescription: SECRET from outside\n---\n"), 0o644)
	os.MkdirAll(filepath.Join(mount, "leak"), 0o755)
	os.Symlink(filepath.Join(outside, "leak.md"), filepath.Join(mount, "leak", "SKILL.md"))
	os.MkdirAll(filepath.Join(mount, "real"), 0o755)
	os.WriteFile(filepath.Join(mount, "real", "SKILL.md"), []byte("---\nname: real\ndescription: a skill inside\n---\nbody\n"), 0o644)
	op := newOp(t, load(t, "builtins/builtins.wasm"), Config{Op: "skills", Grants: Grants{Mounts: []Mount{{HostDir: mount, GuestPath: "/skills"}}}})
	eff, err := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute, Session: "s1", Op: "skills", Turn: 1, Step: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var prompt string
	for _, e := range eff {
		if e.Kind == hostabi.KindPromptPart {
			prompt += e.Text
		}
	}
	if !strings.Contains(prompt, "real: a skill inside") || strings.Contains(prompt, "SECRET") {
		t.Fatalf("prompt part %q: want the real skill and nothing from outside", prompt)
	}
}
