package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/npmtest"
	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/wasmhost"
)

// The process box through the real binary (issue 27): what a granted
// command or an MCP server starts ends with it, even when it leaves its
// group, even when wagent is killed; and nothing in the box can read
// wagent's environment.

func needBoxE2E(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process boxes are Linux only; elsewhere grants record enforcement partial")
	}
	if e := procbox.Probe(); !e.Full() {
		t.Fatalf("this Linux system gives no process box, which these tests prove: %s", e)
	}
}

// boxToken is a string no other process on the machine has in its command
// line or environment.
func boxToken() string {
	return fmt.Sprintf("%d.%06d", 100+os.Getpid()%800, time.Now().Nanosecond()/1000)
}

// holders lists the live processes whose command line or environment
// holds tok.
func holders(tok string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range procs {
		if st, err := os.ReadFile(p + "/stat"); err != nil || bytes.Contains(st, []byte(") Z ")) {
			continue
		}
		cmd, _ := os.ReadFile(p + "/cmdline")
		env, _ := os.ReadFile(p + "/environ")
		if bytes.Contains(cmd, []byte(tok)) || bytes.Contains(env, []byte(tok)) {
			out = append(out, p+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// shellProject is a project folder with a pipeline that grants the shell
// op any command line, as the attacker had, and a script whose
// model runs line once and then says done.
func shellProject(t *testing.T, line string) (dir, pipe, script string) {
	t.Helper()
	dir = t.TempDir()
	pipe = filepath.Join(dir, "agent.yaml")
	unconfined := "false"
	if !wasmhost.CanConfine() {
		unconfined = "true"
	}
	os.WriteFile(pipe, []byte(`ops:
  - use: builtin:shell
    grants:
      mounts: ["./:/work:rw"]
      exec: [{cmd: "*", shell: true, unconfined: `+unconfined+`, timeout_ms: 120000}]
`), 0o644)
	script = filepath.Join(t.TempDir(), "script.yaml")
	q := strings.ReplaceAll(line, `\`, `\\`)
	q = strings.ReplaceAll(q, `"`, `\"`)
	q = strings.ReplaceAll(q, "\n", `\n`)
	os.WriteFile(script, []byte(`replies:
  - tool_calls: [{id: sh1, name: shell, arguments: {command: "`+q+`"}}]
  - content: "done"
`), 0o644)
	return dir, pipe, script
}

// TestE2EBoxEscapes: setsid, a double fork and nohup each start a process
// that would outlive the call; when wagent run has exited, none is left.
func TestE2EBoxEscapes(t *testing.T) {
	needBoxE2E(t)
	tok := boxToken()
	line := `setsid sh -c 'touch a; exec sleep ` + tok + `' </dev/null >/dev/null 2>&1 &
( (touch b; exec sleep ` + tok + `) & )
nohup sh -c 'touch c; exec sleep ` + tok + `' </dev/null >/dev/null 2>&1 &
while [ ! -e a ] || [ ! -e b ] || [ ! -e c ]; do :; done; echo started`
	dir, pipe, script := shellProject(t, line)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	r := exeIn(t, dir, 2*time.Minute, env, "run", "--session", "esc", "--provider", "script", "--script", script, "--pipeline", pipe, "escape")
	if r.code != exitOK || !strings.Contains(r.stdout, "done") {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	res := toolResults(t, env, "esc")
	if !strings.Contains(res["1.1.1"].Content, "started") {
		t.Fatalf("the command did not start its escapes: %+v", res["1.1.1"])
	}
	if left := holders(tok); len(left) > 0 {
		t.Fatalf("processes outlived the call and wagent:\n%s", strings.Join(left, "\n"))
	}
}

// TestE2EBoxOwnerKilled: wagent is killed with SIGKILL while a command's
// child waits to write; nothing of the command is left to write after
// the kill, and resume answers the call as unknown without running it.
func TestE2EBoxOwnerKilled(t *testing.T) {
	needBoxE2E(t)
	tok := boxToken()
	line := `echo start >> k.txt; sh -c 'while [ ! -e go ]; do sleep 0.01; done; echo late >> k.txt' ` + tok + ` & wait`
	dir, pipe, script := shellProject(t, line)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	cmd := exec.Command(wagentBin(t), "run", "--session", "kill", "--provider", "script", "--script", script, "--pipeline", pipe, "write later")
	cmd.Dir, cmd.Env = dir, procEnv(env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, "the command's late writer", func() bool { return len(holders(tok)) > 0 })
	cmd.Process.Kill() // SIGKILL: nothing of wagent runs after it
	cmd.Wait()
	waitUntil(t, time.Minute, "the command's processes to end with wagent", func() bool { return len(holders(tok)) == 0 })
	// Were the writer alive, this would make it write.
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	r := exeIn(t, dir, 2*time.Minute, env, "resume", "kill")
	if r.code != exitOK {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s\nfirst run: %s", r.code, r.stdout, r.stderr, out.String())
	}
	if x := toolResults(t, env, "kill")["1.1.1"]; !x.IsError || x.Code != "TOOL_OUTCOME_UNKNOWN" {
		t.Errorf("the interrupted call's result %+v; want its outcome unknown", x)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "k.txt")); string(b) != "start\n" {
		t.Fatalf("k.txt is %q: the command ran again or wrote after wagent was killed", b)
	}
}

// TestE2EBoxCannotReadTheOwner: a secret planted in wagent's environment
// reaches no command through any path it has (its environment, its
// parent's, every /proc entry it can open), so it is in no tool result,
// no log and no model request.
func TestE2EBoxCannotReadTheOwner(t *testing.T) {
	needBoxE2E(t)
	const secret = "sk-planted-e2e-box-5ecret"
	line := `env; echo; cat /proc/$PPID/environ /proc/$PPID/cmdline; echo;
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/maps /proc/[0-9]*/task/[0-9]*/environ; do cat "$f" 2>/dev/null; done; echo; ls /proc`
	dir, pipe, script := shellProject(t, line)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t), "PLANTED_API_KEY": secret, "ANTHROPIC_API_KEY": secret}
	r := exeIn(t, dir, 2*time.Minute, env, "run", "--session", "peek", "--provider", "script", "--script", script, "--pipeline", pipe, "look around")
	if r.code != exitOK {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	x := toolResults(t, env, "peek")["1.1.1"]
	if !strings.Contains(x.Content, "PATH=") {
		t.Fatalf("the command did not run: %+v", x)
	}
	l := exe(t, env, "log", "peek", "--json")
	if strings.Contains(x.Content, secret) || strings.Contains(l.stdout, secret) || strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("the owner's secret reached the command:\n%s", x.Content)
	}
}

// TestE2EBoxWrappedMCPServer: a server started through sh -c, which also
// starts a child that leaves its group, is gone with everything it
// started after wagent exits, and after wagent is killed with SIGKILL.
func TestE2EBoxWrappedMCPServer(t *testing.T) {
	needBoxE2E(t)
	everything := npmtest.Bin(t, "mcp-server-everything")
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "exit", true: "sigkill"}[kill], func(t *testing.T) {
			tok := boxToken()
			dir := t.TempDir()
			pipe := filepath.Join(dir, "agent.yaml")
			os.WriteFile(pipe, []byte(fmt.Sprintf(`ops:
  - mcp: everything
    command: [sh, -c, "setsid sleep %s </dev/null >/dev/null 2>&1 & %s stdio; true"]
    env: {WAGENT_E2E_TOKEN: "%s"}
    timeout_ms: 120000
`, tok, everything, tok)), 0o644)
			script := filepath.Join(t.TempDir(), "script.yaml")
			os.WriteFile(script, []byte(`replies:
  - tool_calls: [{id: slow1, name: everything__trigger-long-running-operation, arguments: {duration: 60, steps: 60}}]
  - content: "done"
`), 0o644)
			env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
			if !kill {
				os.WriteFile(script, []byte("replies:\n  - content: \"done\"\n"), 0o644)
				r := exeIn(t, dir, 2*time.Minute, env, "run", "--provider", "script", "--script", script, "--pipeline", pipe, "hi")
				if r.code != exitOK {
					t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				if left := holders(tok); len(left) > 0 {
					t.Fatalf("the server or its child outlived wagent:\n%s", strings.Join(left, "\n"))
				}
				return
			}
			cmd := exec.Command(wagentBin(t), "run", "--provider", "script", "--script", script, "--pipeline", pipe, "go slow")
			cmd.Dir, cmd.Env = dir, procEnv(env)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The server (its environment has the token) and the sleep.
			waitUntil(t, time.Minute, "the wrapped server and its child", func() bool { return len(holders(tok)) >= 2 })
			cmd.Process.Kill()
			cmd.Wait()
			waitUntil(t, time.Minute, "the server and its child to end with wagent", func() bool { return len(holders(tok)) == 0 })
		})
	}
}

func toolResults(t *testing.T, env map[string]string, id string) map[string]event.ToolResult {
	t.Helper()
	res := map[string]event.ToolResult{}
	for _, x := range dataOf[event.ToolResult](t, logEvents(t, env, id), event.EvToolResult) {
		res[x.CallID] = x
	}
	return res
}

// TestE2EBoxUnprivileged runs wagent as a user that is not root (nobody),
// as people do, so that the box through a user namespace is what is
// proven: a command's escapes end with the call and the owner's planted
// secret stays out of reach. (Run as another user, the tests above
// already are this proof.)
func TestE2EBoxUnprivileged(t *testing.T) {
	needBoxE2E(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the other box tests of this run are the unprivileged ones")
	}
	// Folders nobody can use: the binary, its home, cache and project.
	base, err := os.MkdirTemp("", "wagent-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	mk := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o777)
		return p
	}
	os.Chmod(base, 0o755)
	bin := filepath.Join(mk("bin"), "wagent")
	data, err := os.ReadFile(wagentBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tok := boxToken()
	const secret = "sk-planted-nobody-5ecret"
	line := `setsid sh -c 'touch a; exec sleep ` + tok + `' </dev/null >/dev/null 2>&1 &
( (touch b; exec sleep ` + tok + `) & )
while [ ! -e a ] || [ ! -e b ]; do :; done; id -u; cat /proc/$PPID/environ;
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f" 2>/dev/null; done; echo; echo started`
	_, pipe, script := shellProject(t, line)
	project := mk("project")
	for _, f := range []string{pipe, script} {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(project, filepath.Base(f)), b, 0o644)
	}
	env := map[string]string{"WAGENT_HOME": mk("home"), "WAGENT_CACHE_DIR": mk("cache"), "HOME": mk("userhome"), "PLANTED_API_KEY": secret}
	cmd := exec.Command(bin, "run", "--session", "nobody", "--provider", "script", "--script", "script.yaml", "--pipeline", "agent.yaml", "escape as nobody")
	cmd.Dir, cmd.Env = project, procEnv(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wagent run as nobody: %v\n%s", err, out)
	}
	logCmd := exec.Command(bin, "log", "nobody", "--json")
	logCmd.Dir, logCmd.Env = project, procEnv(env)
	logCmd.SysProcAttr = cmd.SysProcAttr
	log, err := logCmd.Output()
	if err != nil {
		t.Fatalf("wagent log as nobody: %v", err)
	}
	if !bytes.Contains(log, []byte(`started`)) || !bytes.Contains(log, []byte(`65534`)) {
		t.Fatalf("the command did not run as nobody:\n%s\n%s", out, log)
	}
	if bytes.Contains(log, []byte(secret)) || bytes.Contains(out, []byte(secret)) {
		t.Fatalf("the owner's secret reached the command run as nobody:\n%s", log)
	}
	if left := holders(tok); len(left) > 0 {
		t.Fatalf("processes outlived the call of a wagent run as nobody:\n%s", strings.Join(left, "\n"))
	}
}
