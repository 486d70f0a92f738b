package hostabi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// An argv pattern matches one argument per word; a shell's operators are
// ordinary characters, so nothing can be smuggled past a grant.
func TestCommandPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		argv    []string
		want    bool
	}{
		{"go test ./...", []string{"go", "test", "./..."}, true},
		{"go test ./...", []string{"go", "test", "./...", "-run", "X"}, false},
		{"git status", []string{"git", "status"}, true},
		{"git status", []string{"git"}, false},
		{"git diff *", []string{"git", "diff", "HEAD"}, true},
		{"git diff *", []string{"git", "diff"}, false},
		{"git diff *", []string{"git", "diff", "a", "b"}, false},
		{"ls *", []string{"ls", "src"}, true},
		{"ls *", []string{"ls", "src;", "touch", "X"}, false},
		{"go test **", []string{"go", "test"}, true},
		{"go test **", []string{"go", "test", "-run", "X", "./..."}, true},
		{"go test **", []string{"go", "vet"}, false},
		{`echo '*'`, []string{"echo", "*"}, true},
		{`echo '*'`, []string{"echo", "x"}, false},
		{`git commit -m *`, []string{"git", "commit", "-m", "a message with spaces"}, true},
		{`grep "a b" *`, []string{"grep", "a b", "f"}, true},
		{"**", []string{"anything", "at", "all"}, true},
	} {
		p, err := ParseCommandPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := p.Match(tc.argv); got != tc.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tc.pattern, tc.argv, got, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", "go ** test", `echo "x`, `echo 'x`, `echo x\`} {
		if _, err := ParseCommandPattern(bad); err == nil {
			t.Errorf("ParseCommandPattern(%q) did not fail", bad)
		}
	}
}

func TestCommandPatternCovers(t *testing.T) {
	for _, tc := range []struct {
		req, grant string
		want       bool
	}{
		{"**", "go test ./...", true},
		{"go **", "go test ./...", true},
		{"go test *", "go test ./...", true},
		{"go test *", "go test **", false},
		{"go test ./...", "go test *", false},
		{"git status", "git status", true},
		{"git status", "git diff", false},
		{"git *", "git", false},
		{"git **", "git", true},
	} {
		r, _ := ParseCommandPattern(tc.req)
		g, _ := ParseCommandPattern(tc.grant)
		if got := r.Covers(g); got != tc.want {
			t.Errorf("%q.Covers(%q) = %v, want %v", tc.req, tc.grant, got, tc.want)
		}
	}
	sh := ShellCommandPattern("make test && make lint")
	for req, want := range map[string]bool{"**": true, "sh -c *": true, "sh **": true, "make **": false} {
		r, _ := ParseCommandPattern(req)
		if got := r.Covers(sh); got != want {
			t.Errorf("%q covers a shell grant: %v, want %v", req, got, want)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`go vet ./...`:              {"go", "vet", "./..."},
		`ls src; touch X`:           {"ls", "src;", "touch", "X"},
		`echo "a b" 'c d' e\ f`:     {"echo", "a b", "c d", "e f"},
		`echo $(rm -rf /) ` + "`x`": {"echo", "$(rm", "-rf", "/)", "`x`"},
		`printf "%s\"q" ''`:         {"printf", `%s"q`, ""},
		"  ":                        nil,
	} {
		got, err := SplitCommand(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMatchShellLine(t *testing.T) {
	for _, tc := range []struct {
		pattern, line string
		want          bool
	}{
		{"make test", "make test", true},
		{"make test", "make test; rm -rf /", false},
		{"make *", "make test; rm -rf /", true}, // the documented risk
		{"npm run *", "npm run build", true},
		{"npm run *", "npx x", false},
	} {
		if got := MatchShellLine(tc.pattern, tc.line); got != tc.want {
			t.Errorf("MatchShellLine(%q, %q) = %v", tc.pattern, tc.line, got)
		}
	}
}

func TestHostPattern(t *testing.T) {
	for _, tc := range []struct {
		spec string
		host string
		port int
		want bool
	}{
		{"api.github.com", "api.github.com", 443, true},
		{"api.github.com", "api.github.com", 80, true},
		{"api.github.com", "api.github.com", 8443, false},
		{"API.GitHub.com", "api.github.com", 443, true},
		{"api.github.com", "evil.com", 443, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "127.0.0.1", 8081, false},
		{"127.0.0.1:8080", "127.0.0.1", 80, false},
		{"*.example.com", "www.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "evilexample.com", 443, false},
		{"*", "anything.org", 443, true},
		{"*", "anything.org", 22, false},
		{"[::1]:9000", "::1", 9000, true},
	} {
		p, err := ParseHostPattern(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if got := p.Matches(tc.host, tc.port); got != tc.want {
			t.Errorf("%q.Matches(%s, %d) = %v", tc.spec, tc.host, tc.port, got)
		}
	}
	for spec, want := range map[string]string{
		"https://api.github.com": "must be a host name, not a URL",
		"a b":                    "which a host name cannot have",
		"host:0":                 "is not 1-65535",
		"host:x":                 "is not 1-65535",
		"::1":                    "write it in brackets",
		"":                       "names no host",
	} {
		if _, err := ParseHostPattern(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHostPattern(%q) = %v, want %q", spec, err, want)
		}
	}
	p, _ := ParseHostPattern("[::1]:9000")
	if p.String() != "[::1]:9000" {
		t.Errorf("String() = %q", p.String())
	}
}

// A read-only mount is written as its path, as in ABI 1.0; a read-write
// one as an object. Capabilities of 1.2 need a 1.2 manifest.
func TestManifestCapabilities(t *testing.T) {
	m, err := DecodeManifest([]byte(`{"name":"files","abi":"1.2","hooks":["tool"],"capabilities":{"mounts":["/skills",{"path":"/work","write":true}],"http":["*","127.0.0.1:8080"],"exec":["go test **","**"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []GuestMount{{Path: "/skills"}, {Path: "/work", Write: true}}
	if !reflect.DeepEqual(m.Capabilities.Mounts, want) {
		t.Fatalf("mounts %+v", m.Capabilities.Mounts)
	}
	b, _ := json.Marshal(m.Capabilities)
	if string(b) != `{"mounts":["/skills",{"path":"/work","write":true}],"http":["*","127.0.0.1:8080"],"exec":["go test **","**"]}` {
		t.Errorf("marshalled %s", b)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x","abi":"1.1","hooks":["tool"],"capabilities":{"mounts":[{"path":"/w","write":true}]}}`, "read-write mount /w needs abi 1.2"},
		{`{"name":"x","abi":"1.1","hooks":["tool"],"capabilities":{"http":["*"]}}`, "capabilities http and exec need abi 1.2"},
		{`{"name":"x","abi":"1.2","hooks":["tool"],"capabilities":{"mounts":[{"path":"/w","rw":true}]}}`, `unknown mount key "rw"`},
		{`{"name":"x","abi":"1.2","hooks":["tool"],"capabilities":{"mounts":["/w","/w"]}}`, "mount /w is requested twice"},
		{`{"name":"x","abi":"1.2","hooks":["tool"],"capabilities":{"http":["https://x.org/"]}}`, "not a URL"},
		{`{"name":"x","abi":"1.2","hooks":["tool"],"capabilities":{"exec":["go ** x"]}}`, "** must be the last word"},
	} {
		_, err := DecodeManifest([]byte(tc.in))
		if err == nil || !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeManifest(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// What the guest appends the host parses, and the other way round; the
// host refuses a request key it does not know.
func TestCapabilityDocuments(t *testing.T) {
	hreq := HTTPRequest{Method: "POST", URL: "http://127.0.0.1:1/x?y=\"z\"", Headers: map[string]string{"B": "2", "A": "1"}, Body: "é\n", MaxBytes: 10, TimeoutMS: 20}
	var hreq2 HTTPRequest
	if err := ParseHTTPRequest(AppendHTTPRequest(nil, &hreq), &hreq2); err != nil || !reflect.DeepEqual(hreq, hreq2) {
		t.Errorf("http request round trip: %+v %v", hreq2, err)
	}
	for _, hresp := range []HTTPResponse{
		{Status: 200, URL: "u", Headers: map[string]string{"Content-Type": "text/html"}, Body: "<p>", Truncated: true, Size: 3, Decoded: "gzip", DurationMS: 5},
		{Status: 200, URL: "u", Headers: map[string]string{"Content-Type": "image/png"}, Size: 1 << 20, Binary: "image/png"},
	} {
		var hresp2 HTTPResponse
		if err := ParseHTTPResponse(AppendHTTPResponse(nil, &hresp), &hresp2); err != nil || !reflect.DeepEqual(hresp, hresp2) {
			t.Errorf("http response round trip: %+v %v", hresp2, err)
		}
		// encoding/json reads the same fields (the names of the tags).
		var viaJSON HTTPResponse
		if err := json.Unmarshal(AppendHTTPResponse(nil, &hresp), &viaJSON); err != nil || !reflect.DeepEqual(hresp, viaJSON) {
			t.Errorf("http response via encoding/json: %+v %v", viaJSON, err)
		}
	}
	ereq := ExecRequest{Argv: []string{"go", "vet", "./..."}, Dir: "/work/sub", Stdin: "in", TimeoutMS: 5}
	var ereq2 ExecRequest
	if err := ParseExecRequest(AppendExecRequest(nil, &ereq), &ereq2); err != nil || !reflect.DeepEqual(ereq, ereq2) {
		t.Errorf("exec request round trip: %+v %v", ereq2, err)
	}
	eresp := ExecResponse{ExitCode: -1, Stdout: "o", Stderr: "e", StdoutBytes: 9, StderrBytes: 8, StdoutCut: 7, StderrCut: 6, Killed: "timeout", DurationMS: 3, Confinement: "landlock", Error: "x", Code: CapTimeout}
	var eresp2 ExecResponse
	if err := ParseExecResponse(AppendExecResponse(nil, &eresp), &eresp2); err != nil || !reflect.DeepEqual(eresp, eresp2) {
		t.Errorf("exec response round trip: %+v %v", eresp2, err)
	}
	g := Granted{Mounts: []GuestMount{{Path: "/work", Write: true}, {Path: "/ro"}}, HTTP: []string{"*"}, Exec: []GrantedCommand{{Cmd: "go test **", TimeoutMS: 60000, OutputBytes: 1 << 20, Confinement: "landlock"}, {Cmd: "make *", Shell: true, Confinement: "none"}}}
	var g2 Granted
	if err := ParseGranted(AppendGranted(nil, &g), &g2); err != nil || !reflect.DeepEqual(g, g2) {
		t.Errorf("granted round trip: %+v %v", g2, err)
	}
	// And what the host's encoding/json-shaped types say is the same.
	var viaJSON Granted
	if err := json.Unmarshal(AppendGranted(nil, &g), &viaJSON); err != nil || !reflect.DeepEqual(g, viaJSON) {
		t.Errorf("granted via encoding/json: %+v %v", viaJSON, err)
	}
	for in, want := range map[string]string{
		`{"url":"x","surprise":1}`: `unknown key "surprise"`,
		`{"argv":"ls"}`:            "want an array",
		`[]`:                       "want an object",
		`{"url":"x"} {}`:           "data after the value",
	} {
		var r HTTPRequest
		err := ParseHTTPRequest([]byte(in), &r)
		if strings.HasPrefix(in, `{"argv"`) {
			var e ExecRequest
			err = ParseExecRequest([]byte(in), &e)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parse %s = %v, want %q", in, err, want)
		}
	}
}

func FuzzParseCapabilityRequests(f *testing.F) {
	f.Add([]byte(`{"method":"GET","url":"http://x/","headers":{"a":"b"},"max_bytes":1}`))
	f.Add([]byte(`{"argv":["go","vet"],"dir":"/work","stdin":"","timeout_ms":5}`))
	f.Add([]byte(`{"argv":[[[[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h HTTPRequest
		if ParseHTTPRequest(b, &h) == nil {
			var again HTTPRequest
			if err := ParseHTTPRequest(AppendHTTPRequest(nil, &h), &again); err != nil {
				t.Fatalf("re-parse of %q: %v", b, err)
			}
		}
		var e ExecRequest
		if ParseExecRequest(b, &e) == nil {
			var again ExecRequest
			if err := ParseExecRequest(AppendExecRequest(nil, &e), &again); err != nil {
				t.Fatalf("re-parse of %q: %v", b, err)
			}
		}
	})
}
