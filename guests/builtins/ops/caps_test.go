package ops

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// The capability ops run natively here, on a real folder standing in for
// the mount (config dir) and a fake host for HTTP and commands; the
// wasmhost tests run the same ops as wasm against the real host.

// runTool runs one call of an owned tool and returns its result.
func runTool(t *testing.T, op, tool, config, args string, f *pdk.Fake) hostabi.Effect {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Op: op, Config: json.RawMessage(config), Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: op, Decision: "allow", Started: true}},
	}}
	eff, err := pdk.Test(v, f)
	// Besides the result, a write records its change as notes (undo.go).
	var res []hostabi.Effect
	for _, e := range eff {
		if e.Kind != hostabi.KindNote {
			res = append(res, e)
		}
	}
	if err != nil || len(res) != 1 || res[0].Kind != hostabi.KindResult {
		t.Fatalf("%s %s: effects %+v, err %v", tool, args, eff, err)
	}
	return res[0]
}

func project(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"main.go":          "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
		"lib/util.go":      "package lib\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return a - b }\n",
		"lib/util_test.go": "package lib\n",
		".git/config":      "[core]\n",
		"bin.dat":          "\x00\x01\x02hello",
		"notes/todo.txt":   "hello world\nsecond line\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, fmt.Sprintf(`{"dir":%q}`, dir)
}

func TestFilesRead(t *testing.T) {
	dir, cfg := project(t)
	long := ""
	for i := 1; i <= 50; i++ {
		long += fmt.Sprintf("line %d\n", i)
	}
	wide := strings.Repeat(strings.Repeat("w", 99)+"\n", 200)
	os.WriteFile(filepath.Join(dir, "wide.txt"), []byte(wide), 0o644)
	os.WriteFile(filepath.Join(dir, "long.txt"), []byte(long), 0o644)
	for _, tc := range []struct {
		args, want string
		isErr      bool
	}{
		{`{"path":"main.go"}`, "     1\tpackage main\n     2\t\n     3\timport \"fmt\"\n", false},
		{`{"path":"long.txt","offset":10,"limit":2}`, "    10\tline 10\n    11\tline 11\n… lines 10-11 of 50 shown; read on with offset 12\n", false},
		{`{"path":"long.txt","offset":49}`, "    49\tline 49\n    50\tline 50\n", false},
		{`{"path":"long.txt","offset":60}`, "long.txt has 50 lines; offset 60 is past the end", true},
		{`{"path":"nope.go"}`, "nope.go does not exist", true},
		{`{"path":"bin.dat"}`, "bin.dat is a binary file", true},
		{`{"path":"lib"}`, "lib is a directory", true},
		{`{"path":"../etc/passwd"}`, "../etc/passwd is outside the project", true},
		{`{"path":"/etc/passwd"}`, "/etc/passwd is outside the project", true},
		{`{"path":1}`, `argument "path" must be a string`, true},
	} {
		r := runTool(t, "files", "read_file", cfg, tc.args, nil)
		if r.IsError != tc.isErr || !strings.HasPrefix(r.Content, tc.want) && !strings.Contains(r.Content, tc.want) {
			t.Errorf("read_file %s = %v %q, want %v %q", tc.args, r.IsError, r.Content, tc.isErr, tc.want)
		}
	}
	// The budget cuts a long read and says where to go on.
	r := runTool(t, "files", "read_file", strings.TrimSuffix(cfg, "}")+`,"max_read_bytes":1024}`, `{"path":"wide.txt"}`, nil)
	lines := strings.Split(strings.TrimSpace(r.Content), "\n")
	if lines[len(lines)-1] != "… lines 1-9 of 200 shown (cut at 1024 bytes); read on with offset 10" {
		t.Errorf("cut read ends %q", lines[len(lines)-1])
	}
}

func TestFilesWriteAndEdit(t *testing.T) {
	dir, cfg := project(t)
	r := runTool(t, "files", "write_file", cfg, `{"path":"new/deep/x.txt","content":"one\ntwo\n"}`, nil)
	if r.IsError || r.Content != "wrote 8 bytes to new/deep/x.txt (a new file)" {
		t.Errorf("write_file: %+v", r)
	}
	r = runTool(t, "files", "write_file", cfg, `{"path":"new/deep/x.txt","content":"uno\n"}`, nil)
	if r.Content != "wrote 4 bytes to new/deep/x.txt (replaced 8 bytes)" {
		t.Errorf("write_file again: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "new/deep/x.txt")); string(b) != "uno\n" {
		t.Errorf("file holds %q", b)
	}
	r = runTool(t, "files", "edit_file", cfg, `{"path":"main.go","old_string":"fmt.Println(\"hello\")","new_string":"fmt.Println(\"hello, world\")"}`, nil)
	if r.IsError || !strings.HasPrefix(r.Content, "edited main.go: replaced 1 occurrence (the first at line 6). Now:") || !strings.Contains(r.Content, "     6\t\tfmt.Println(\"hello, world\")") {
		t.Errorf("edit_file: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); !strings.Contains(string(b), `"hello, world"`) {
		t.Errorf("main.go: %s", b)
	}
	for _, tc := range []struct{ args, want string }{
		// Not there: the nearest text is shown, white-space differences
		// named as such.
		{`{"path":"lib/util.go","old_string":"func  Add(a, b int)  int { return a + b }","new_string":"x"}`,
			"old_string was not found in lib/util.go.\nAt line 4 the text matches if white space is ignored (indentation or line breaks differ):\n     4\tfunc Add(a, b int) int { return a + b }\n"},
		{`{"path":"lib/util.go","old_string":"func Add(a, b int) int { return a * b }","new_string":"x"}`,
			"Near match at line 4 ("},
		{`{"path":"lib/util.go","old_string":"zebra quagga","new_string":"x"}`,
			"Nothing in the file is close to it"},
		{`{"path":"lib/util.go","old_string":"int","new_string":"int64"}`,
			"old_string occurs 4 times in lib/util.go (at lines 4, 4, 6, 6): include more of the surrounding text"},
		{`{"path":"lib/util.go","old_string":"x","new_string":"x"}`, "nothing would change"},
		{`{"path":"lib/util.go","old_string":"","new_string":"x"}`, "old_string is empty"},
		{`{"path":"ghost.go","old_string":"a","new_string":"b"}`, "ghost.go does not exist"},
	} {
		r := runTool(t, "files", "edit_file", cfg, tc.args, nil)
		if !r.IsError || !strings.Contains(r.Content, tc.want) {
			t.Errorf("edit_file %s = %q, want an error containing %q", tc.args, r.Content, tc.want)
		}
	}
	r = runTool(t, "files", "edit_file", cfg, `{"path":"lib/util.go","old_string":"int","new_string":"int64","replace_all":true}`, nil)
	if r.IsError || !strings.Contains(r.Content, "replaced 4 occurrences") {
		t.Errorf("replace_all: %+v", r)
	}
}

func TestFilesListGlobGrep(t *testing.T) {
	_, cfg := project(t)
	for _, tc := range []struct{ tool, args, want string }{
		{"list_dir", `{}`, ".git/\nbin.dat (8 B)\nlib/\nmain.go (66 B)\nnotes/\n"},
		{"list_dir", `{"path":"lib"}`, "util.go (107 B)\nutil_test.go (12 B)\n"},
		{"glob", `{"pattern":"**/*.go"}`, "lib/util.go\nlib/util_test.go\nmain.go\n"},
		{"glob", `{"pattern":"*.go"}`, "main.go\n"},
		{"glob", `{"pattern":"**/*_test.go"}`, "lib/util_test.go\n"},
		{"glob", `{"pattern":"**/config"}`, "no files match **/config"}, // .git is skipped
		{"grep", `{"pattern":"hello"}`, "main.go:6: \tfmt.Println(\"hello\")\nnotes/todo.txt:1: hello world\n"},
		{"grep", `{"pattern":"^func (Add|Sub)","glob":"*.go"}`, "lib/util.go:4: func Add(a, b int) int { return a + b }\nlib/util.go:6: func Sub(a, b int) int { return a - b }\n"},
		{"grep", `{"pattern":"HELLO","ignore_case":true,"path":"notes"}`, "notes/todo.txt:1: hello world\n"},
		{"grep", `{"pattern":"int","max_results":1}`, "lib/util.go:4: func Add(a, b int) int { return a + b }\n… 3 matches in 2 files; 2 more not shown"},
		{"grep", `{"pattern":"nothing here"}`, "no matches for nothing here"},
	} {
		r := runTool(t, "files", tc.tool, cfg, tc.args, nil)
		if r.IsError || !strings.HasPrefix(r.Content, tc.want) {
			t.Errorf("%s %s = %q, want %q", tc.tool, tc.args, r.Content, tc.want)
		}
	}
	if r := runTool(t, "files", "grep", cfg, `{"pattern":"("}`, nil); !r.IsError || !strings.Contains(r.Content, "is not a regular expression") {
		t.Errorf("bad regexp: %+v", r)
	}
}

func TestFetch(t *testing.T) {
	page := `<html><head><title>T</title><style>p{}</style><script>alert(1)</script></head>
<body><h1>Title</h1><p>First  paragraph with <a href="/x">a link</a>.</p>
<ul><li>one</li><li>two &amp; three</li></ul><noscript>no</noscript></body></html>`
	var asked []string
	f := &pdk.Fake{HTTP: func(r *hostabi.HTTPRequest) hostabi.HTTPResponse {
		asked = append(asked, r.Method+" "+r.URL)
		switch r.URL {
		case "http://h/page":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"}, Body: page}
		case "http://h/missing":
			return hostabi.HTTPResponse{Status: 404, URL: r.URL, Headers: map[string]string{"Content-Type": "text/plain"}, Body: "not here"}
		case "http://h/big":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{"Content-Type": "text/plain"}, Body: strings.Repeat("x", 5000)}
		case "http://h/img":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{"Content-Type": "image/png"}, Size: 1048576, Binary: "image/png"}
		case "http://h/bomb":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{}, Size: 2097152, Truncated: true, Decoded: "gzip", Binary: "application/octet-stream"}
		case "http://h/br":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{"Content-Type": "text/html", "Content-Encoding": "br"}, Size: 300, Binary: "application/octet-stream"}
		case "http://h/textbomb":
			return hostabi.HTTPResponse{Status: 200, URL: r.URL, Headers: map[string]string{"Content-Type": "text/plain"}, Body: strings.Repeat("y", 3000), Size: 3000, Truncated: true, Decoded: "gzip"}
		}
		return hostabi.HTTPResponse{Code: hostabi.CapNotGranted, Error: "http_request: evil:443 is not granted (granted: h)"}
	}}
	r := runTool(t, "fetch", "fetch", "", `{"url":"http://h/page"}`, f)
	want := "http://h/page (HTTP 200, text/html)\n\n# Title\n\nFirst paragraph with a link (/x).\n\n- one\n- two & three"
	if r.IsError || r.Content != want {
		t.Errorf("fetch page:\n%q\nwant\n%q", r.Content, want)
	}
	for _, tc := range []struct {
		url, want string
		isErr     bool
	}{
		{"http://h/missing", "http://h/missing (HTTP 404, text/plain)\n\nnot here", true},
		{"https://evil/", "evil:443 is not granted (granted: h)", true},
		{"http://h/img", "http://h/img (HTTP 200, image/png)\n\nbinary body: image/png, 1048576 bytes (not shown)", false},
		{"http://h/bomb", "http://h/bomb (HTTP 200)\n\nbinary body: application/octet-stream, more than 2097152 bytes after gzip decoding (not shown)", false},
		{"http://h/br", "binary body: application/octet-stream, 300 bytes, Content-Encoding br not decoded (not shown)", false},
		{"http://h/textbomb", "http://h/textbomb (HTTP 200, text/plain)\n\n" + strings.Repeat("y", 3000) + "\n… (the response was longer than the host reads: it kept its first 3000 bytes after gzip decoding; this is its beginning)", false},
	} {
		r := runTool(t, "fetch", "fetch", "", `{"url":"`+tc.url+`"}`, f)
		if r.IsError != tc.isErr || !strings.Contains(r.Content, tc.want) {
			t.Errorf("fetch %s = %+v, want %q", tc.url, r, tc.want)
		}
	}
	r = runTool(t, "fetch", "fetch", `{"max_bytes":1024}`, `{"url":"http://h/big"}`, f)
	if !strings.HasSuffix(r.Content, "… (cut at 1024 bytes of text)") {
		t.Errorf("big fetch ends %q", r.Content[len(r.Content)-60:])
	}
	r = runTool(t, "fetch", "fetch", `{"max_bytes":1024}`, `{"url":"http://h/textbomb"}`, f)
	if !strings.HasSuffix(r.Content, "y\n… (cut at 1024 bytes of text; the response was longer than the host reads: it kept its first 3000 bytes after gzip decoding; this is its beginning)") {
		t.Errorf("cut twice, ends %q", r.Content[len(r.Content)-160:])
	}
	if asked[0] != "GET http://h/page" {
		t.Errorf("asked %q", asked)
	}
}

func TestShell(t *testing.T) {
	var got []hostabi.ExecRequest
	f := &pdk.Fake{
		Granted: hostabi.Granted{Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}}, Exec: []hostabi.GrantedCommand{{Cmd: "go vet **"}, {Cmd: "make *", Shell: true}}},
		Exec: func(r *hostabi.ExecRequest) hostabi.ExecResponse {
			got = append(got, *r)
			switch {
			case r.Shell != "":
				return hostabi.ExecResponse{ExitCode: 2, Stderr: "make: *** no rule", StderrBytes: 17, DurationMS: 1200}
			case r.Argv[0] == "go":
				return hostabi.ExecResponse{ExitCode: 0, Stdout: strings.Repeat("a", 600) + strings.Repeat("b", 600), StdoutBytes: 1200, DurationMS: 15}
			case r.Argv[0] == "sleep":
				return hostabi.ExecResponse{ExitCode: -1, Killed: "timeout", Code: hostabi.CapTimeout, Error: "exec: killed after its timeout of 1s", DurationMS: 1000}
			}
			return hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapNotGranted, Error: "exec: ls 'src;' touch X matches no exec grant of op shell (granted: go vet **)"}
		},
	}
	r := runTool(t, "shell", "shell", `{"max_output_bytes":256}`, `{"command":"go vet ./...","cwd":"sub"}`, f)
	if r.IsError || !strings.HasPrefix(r.Content, "exit code 0 (15 ms)\n--- stdout (1200 bytes; the middle is cut: about 944 bytes left out) ---\naaaa") || !strings.Contains(r.Content, "\n… [944 bytes cut] …\nbbbb") {
		t.Errorf("go vet: %q", r.Content)
	}
	if got[0].Dir != "/work/sub" || strings.Join(got[0].Argv, " ") != "go vet ./..." {
		t.Errorf("request %+v", got[0])
	}
	r = runTool(t, "shell", "shell", "", `{"command":"ls src; touch X"}`, f)
	if !r.IsError || !strings.Contains(r.Content, "matches no exec grant") || strings.Join(got[1].Argv, "|") != "ls|src;|touch|X" {
		t.Errorf("injection: %+v (argv %q)", r, got[1].Argv)
	}
	r = runTool(t, "shell", "shell", "", `{"command":"make test && make lint"}`, f)
	if r.IsError || got[2].Shell != "make test && make lint" || r.Content != "exit code 2 (1.2 s)\n--- stderr ---\nmake: *** no rule\n" {
		t.Errorf("shell line: %q %+v", r.Content, got[2])
	}
	r = runTool(t, "shell", "shell", "", `{"command":"sleep 100"}`, f)
	if !r.IsError || !strings.HasPrefix(r.Content, "killed after its timeout of 1s (after 1.0 s)") {
		t.Errorf("timeout: %+v", r)
	}
	// The description lists the grants.
	eff, err := pdk.Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "shell"}, f)
	if err != nil || len(eff) != 1 || !strings.Contains(eff[0].Tool.Description, "Allowed commands (a * is any one argument, ** any remaining arguments): go vet **.") ||
		!strings.Contains(eff[0].Tool.Description, "Command lines run by a shell (a * is any text): make *.") {
		t.Errorf("contribute: %+v %v", eff, err)
	}
	// With nothing granted, no tool is offered.
	if eff, err := pdk.Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "shell"}, &pdk.Fake{}); err != nil || len(eff) != 0 {
		t.Errorf("contribute without grants: %+v %v", eff, err)
	}
}

// The default rules: the built-ins' reads are allowed, their writes and
// commands asked; reads: ask asks for everything.
func TestApprovalReadsAndWrites(t *testing.T) {
	for _, tc := range []struct {
		cfg, owner, tool, want string
	}{
		{`{}`, "files", "read_file", "allow"},
		{`{}`, "files", "grep", "allow"},
		{`{}`, "fetch", "fetch", "allow"},
		{`{}`, "files", "write_file", "ask"},
		{`{}`, "files", "edit_file", "ask"},
		{`{}`, "shell", "shell", "ask"},
		{`{}`, "evil", "read_file", "ask"}, // another op's read_file is not a built-in's
		{`{"reads":"ask"}`, "files", "read_file", "ask"},
		{`{"mode":"auto"}`, "files", "write_file", "allow"},
		{`{"deny":["grep"]}`, "files", "grep", "deny"},
	} {
		v := toolCalls(hostabi.PendingCall{ID: "c", Name: tc.tool, Arguments: json.RawMessage(`{}`), Owner: tc.owner})
		v.Config = json.RawMessage(tc.cfg)
		eff, err := pdk.Test(v, nil)
		if err != nil || len(eff) != 1 {
			t.Fatalf("%+v: %+v %v", tc, eff, err)
		}
		got := "deny"
		switch {
		case eff[0].Kind == hostabi.KindApprovalRequest:
			got = "ask"
		case eff[0].Allow:
			got = "allow"
		}
		if got != tc.want {
			t.Errorf("%s %s.%s: %s, want %s", tc.cfg, tc.owner, tc.tool, got, tc.want)
		}
	}
}
