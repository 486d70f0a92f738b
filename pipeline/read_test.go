package pipeline_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/pipeline"
)

func parseError(t *testing.T, yaml string) string {
	t.Helper()
	_, err := pipeline.Parse([]byte(yaml), "p.yaml", t.TempDir())
	if err == nil {
		t.Fatalf("Parse(%q) succeeded", yaml)
	}
	return err.Error()
}

// A key written twice is refused at every level, naming both lines (yaml
// would keep the second and lose the first without a word).
func TestParseDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"top level", "ops: []\nops: []\n", `pipeline p.yaml:2: key "ops" is set twice, at lines 1 and 2`},
		{"entry", "ops:\n  - use: a.wasm\n    use: b.wasm\n", `pipeline p.yaml:3: key "use" is set twice, at lines 2 and 3`},
		{"limits", "ops:\n  - use: a.wasm\n    limits:\n      memory_mb: 16\n      memory_mb: 32\n", `pipeline p.yaml:5: key "memory_mb" is set twice, at lines 4 and 5`},
		{"grants", "ops:\n  - use: a.wasm\n    grants:\n      http: [a.com]\n      http: [b.com]\n", `pipeline p.yaml:5: key "http" is set twice, at lines 4 and 5`},
		{"exec grant", "ops:\n  - use: builtin:shell\n    grants:\n      exec:\n        - cmd: go test\n          cmd: rm -rf\n", `pipeline p.yaml:6: key "cmd" is set twice, at lines 5 and 6`},
		{"config", "ops:\n  - use: a.wasm\n    config:\n      mode: ask\n      mode: auto\n", `pipeline p.yaml:5: op 1: config: key "mode" is set twice, at lines 4 and 5`},
		{"mcp env", "ops:\n  - mcp: files\n    command: [sh]\n    env:\n      A: x\n      A: y\n", `pipeline p.yaml:6: mcp server files: key "A" is set twice, at lines 5 and 6`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseError(t, tc.yaml); got != tc.want {
				t.Errorf("mismatch (-want +got):\n%s", cmp.Diff(tc.want, got))
			}
		})
	}
}

// A value of the wrong type is named by its key and the type it must be.
func TestParseTypeErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"not a mapping", "- use: a.wasm\n", "pipeline p.yaml:1: the file is a mapping with one key, ops: the list of ops (- use: builtin:NAME (or a path to a .wasm file), or - mcp: NAME)"},
		{"ops not a list", "ops: builtin:approval\n", "pipeline p.yaml:1: ops is a list of entries: - use: builtin:NAME (or a path to a .wasm file), or - mcp: NAME"},
		{"entry not a mapping", "ops:\n  - builtin:approval\n", "pipeline p.yaml:2: op 1 is a mapping: - use: builtin:NAME (or a path to a .wasm file), or - mcp: NAME"},
		{"use a list", "ops:\n  - use: [a.wasm]\n", "pipeline p.yaml:2: use is a string: builtin:NAME or a path to a .wasm file"},
		{"timeout words", "ops:\n  - use: a.wasm\n    limits: {timeout_ms: soon}\n", "pipeline p.yaml:3: limits.timeout_ms is a number of milliseconds"},
		{"memory negative", "ops:\n  - use: a.wasm\n    limits:\n      memory_mb: -1\n", "pipeline p.yaml:4: limits.memory_mb is a number of megabytes"},
		{"limits a list", "ops:\n  - use: a.wasm\n    limits: [16]\n", "pipeline p.yaml:3: limits is a mapping of memory_mb, timeout_ms, max_effects, max_output_bytes, http_kb"},
		{"grants a string", "ops:\n  - use: a.wasm\n    grants: all\n", "pipeline p.yaml:3: grants is a mapping of mounts, http, exec"},
		{"mounts a string", "ops:\n  - use: a.wasm\n    grants: {mounts: ./:/work}\n", "pipeline p.yaml:3: grants.mounts is a list of HOST_DIR:GUEST_PATH[:ro|:rw]"},
		{"exec shell", "ops:\n  - use: builtin:shell\n    grants: {exec: [{cmd: make, shell: sometimes}]}\n", "pipeline p.yaml:3: grants.exec shell: must be true or false"},
		{"exec timeout", "ops:\n  - use: builtin:shell\n    grants: {exec: [{cmd: make, timeout_ms: [1]}]}\n", "pipeline p.yaml:3: grants.exec timeout_ms: must be a number of milliseconds"},
		{"mcp command", "ops:\n  - mcp: files\n    command: sh\n", "pipeline p.yaml:3: mcp server files: command is a list of strings: the program and its arguments"},
		{"mcp timeout", "ops:\n  - mcp: files\n    command: [sh]\n    timeout_ms: 1s\n", "pipeline p.yaml:4: mcp server files: timeout_ms is a number of milliseconds"},
		{"config tag", "ops:\n  - use: a.wasm\n    config: {n: !!int x}\n", "pipeline p.yaml:2: op 1: config: cannot decode !!str `x` as a !!int"},
		{"bad merge", "ops:\n  - <<: 3\n", "pipeline p.yaml:2: << merges a mapping or a list of mappings into this one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseError(t, tc.yaml); got != tc.want {
				t.Errorf("mismatch (-want +got):\n%s", cmp.Diff(tc.want, got))
			}
		})
	}
}

// A file with only a document marker or a null is empty too.
func TestParseEmptyDocument(t *testing.T) {
	for _, data := range []string{"---\n", "~\n", "--- # later\n"} {
		if got, want := parseError(t, data), "pipeline p.yaml: the file is empty; list the ops under a top-level ops: key"; got != want {
			t.Errorf("Parse(%q): mismatch (-want +got):\n%s", data, cmp.Diff(want, got))
		}
	}
}

// Anchors, aliases and << merges read as yaml.v3 decodes them: a key the
// entry sets wins over a merged one, and an alias may stand for any value.
func TestParseAnchorsAndMerges(t *testing.T) {
	s, err := pipeline.Parse([]byte(`
ops:
  - &base
    use: builtin:shell
    limits: &small {memory_mb: 16, timeout_ms: 200}
    grants:
      http: &hosts [api.github.com]
  - <<: *base
    use: builtin:fetch
    grants: {http: *hosts}
  - use: builtin:files
    limits: *small
    config: &self {a: 1}
`), "p.yaml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Use    string
		Memory uint32
		HTTP   []string
		Line   int
	}
	var ops []got
	for _, o := range s.Ops {
		ops = append(ops, got{o.Use, o.Limits.MemoryPages, o.HTTP, o.Line})
	}
	want := []got{
		{"builtin:shell", 256, []string{"api.github.com"}, 3},
		{"builtin:fetch", 256, []string{"api.github.com"}, 8},
		{"builtin:files", 256, nil, 11},
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// A mapping that merges itself is read once, not forever.
	if _, err := pipeline.Parse([]byte("ops:\n  - &e {use: a.wasm, <<: *e}\n"), "p.yaml", "/base"); err != nil {
		t.Errorf("a self-merge: %v", err)
	}
}

// Parse reads files people write by hand and files that arrive with a
// session: whatever the bytes, it returns, and a refusal is one line that
// names the file.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "ops: []\n", "ops: [\n", "- a\n",
		"ops:\n  - use: builtin:approval\n    config: {mode: ask, allow: [calc_total]}\n",
		"ops:\n  - use: ./ops/calc.wasm\n    sha256: 9f2c\n    limits: {memory_mb: 16, timeout_ms: 200}\n",
		"ops:\n  - use: builtin:shell\n    grants:\n      mounts: [\"./:/work:rw\"]\n      http: [\"pkg.go.dev\"]\n      exec:\n        - git status\n        - cmd: go test **\n          env: [HOME]\n          timeout_ms: 300000\n",
		"ops:\n  - mcp: files\n    url: http://127.0.0.1:3001/mcp\n    headers: {Authorization: \"Bearer x\"}\n",
		"ops:\n  - &e {use: a.wasm, limits: &l {memory_mb: 2}}\n  - <<: [*e, {op: x}]\n    limits: *l\n",
		"ops:\n  - use: a.wasm\n    use: b.wasm\n    config: &c {a: *c}\n",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := pipeline.Parse(data, "p.yaml", dir)
		if err == nil {
			return
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "pipeline p.yaml") {
			t.Fatalf("Parse(%q): the error is not one line naming the file: %q", data, msg)
		}
	})
}
