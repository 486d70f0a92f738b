package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/store/jsonl"
)

// An import refuses a log whose recorded settings an open could not read
// (session/created's, or a later pipeline/changed's), in one line naming
// the seq and what is wrong, and writes nothing: afterwards the store has
// no such session, and the good log imports under the same id and runs.
func TestImportRefusesUnreadableSettings(t *testing.T) {
	home, _, _ := recordSession(t)
	// A settings change between turns: pipeline/changed, then a turn.
	if r := wag(t, home, "run", "--session", "r", "--model", "m2", "--api-key", "k", "and once more"); r.code != exitOK {
		t.Fatalf("run with another model: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "s.jsonl")
	if r := wag(t, home, "export", "r", "-o", file); r.code != exitOK {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	good := readFile(t, file)
	h, evs, err := jsonl.Read(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	changed := seqWhere(t, evs, event.EvPipelineChanged, `"model":"m2"`)

	cases := []struct {
		name string
		seq  uint64
		set  func(map[string]any) any // returns the settings to record
		want string
	}{
		{"pipeline as an object", 1, with("pipeline", map[string]any{"file": "agent.yaml"}), "pipeline is an object, want a string"},
		{"provider as a number", 1, with("provider", 7), "provider is a number, want a string"},
		{"settings as a list", 1, func(map[string]any) any { return []any{"openai"} }, "the settings are an array, want an object"},
		{"unknown provider", 1, with("provider", "antropic"), `unknown provider "antropic"`},
		{"api key variable not a name", 1, with("api_key_env", "KEY; rm -rf"), `api_key_env "KEY; rm -rf" is not an environment variable name`},
		{"base URL not http", 1, with("base_url", "file:///etc/passwd"), `openai: base URL "file:///etc/passwd" is not an http(s) URL`},
		{"script provider without a script", 1, with("provider", "script"), "provider script names no script"},
		{"pipeline naming a folder", 1, with("pipeline", "/"), `pipeline "/" names no file`},
		{"a later change's pipeline as a list", changed, with("pipeline", []any{"a.yaml", "b.yaml"}), "pipeline is an array, want a string"},
	}
	other, direct := t.TempDir(), t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.jsonl")
			writeAt(t, bad, withSettings(t, h, evs, c.seq, c.set))
			r := wag(t, other, "import", bad, "--as", "x")
			wantSeq := "seq " + strconv.FormatUint(c.seq, 10) + " ("
			if r.code != exitFailure || !strings.Contains(r.stderr, wantSeq) || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("import: exit %d, stderr %q; want exit %d and one line with %q and %q", r.code, r.stderr, exitFailure, wantSeq, c.want)
			}
			if ids := sessions(t, other); len(ids) != 0 {
				t.Errorf("a refused import left sessions %v", ids)
			}
			if r := wag(t, other, "sessions"); r.code != exitOK || strings.Contains(r.stdout, "\nx ") {
				t.Errorf("wagent sessions: exit %d, lists the refused import:\n%s%s", r.code, r.stdout, r.stderr)
			}

			// An open refuses the same, with the same words: a log written
			// without the check (as before it), resumed; or, for settings
			// a later change replaced, a fork from before that change.
			id := strings.NewReplacer(" ", "-", "'", "").Replace(c.name)
			writeUnchecked(t, direct, id, readFile(t, bad))
			if c.seq < changed {
				if r := wag(t, direct, "fork", id, "--at", strconv.FormatUint(changed-1, 10), "--as", id+"-fork"); r.code != exitOK {
					t.Fatalf("fork: exit %d: %s", r.code, r.stderr)
				}
				id += "-fork"
			}
			if r := wag(t, direct, "resume", id, "--api-key", "k"); r.code != exitFailure || !strings.Contains(r.stderr, "session "+id+": its recorded settings cannot be read: "+c.want) {
				t.Errorf("resume %s: exit %d, stderr %q; want %q", id, r.code, r.stderr, c.want)
			}
		})
	}

	// The good log imports under the id the refused ones named, and opens:
	// its log reads, and it runs a turn.
	if r := wag(t, other, "import", file, "--as", "x"); r.code != exitOK || !strings.Contains(r.stdout, "as session x") {
		t.Fatalf("import of the good log: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, other, "log", "x"); r.code != exitOK || !strings.Contains(r.stdout, "and once more") {
		t.Errorf("log of the import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, other, "run", "--session", "x", "--api-key", "k", "and again"); r.code != exitOK || !strings.Contains(r.stdout, "Something else, then.") {
		t.Errorf("run the import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// with returns a settings edit that sets key to v.
func with(key string, v any) func(map[string]any) any {
	return func(m map[string]any) any {
		m[key] = v
		return m
	}
}

// withSettings returns the export h, evs with the settings of the event at
// seq (session/created or pipeline/changed) replaced by what edit makes
// of them.
func withSettings(t *testing.T, h jsonl.Header, evs []store.Event, seq uint64, edit func(map[string]any) any) string {
	t.Helper()
	out := make([]store.Event, len(evs))
	copy(out, evs)
	e := &out[seq-1]
	var data map[string]json.RawMessage
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatal(err)
	}
	set := map[string]any{}
	if err := json.Unmarshal(data["settings"], &set); err != nil {
		t.Fatalf("seq %d (%s): settings %s: %v", seq, e.Type, data["settings"], err)
	}
	raw, err := json.Marshal(edit(set))
	if err != nil {
		t.Fatal(err)
	}
	data["settings"] = raw
	if e.Data, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := jsonl.Write(&b, h, out); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// writeUnchecked writes the log of an export into the store under home
// as session id, with the fold's checks only (as imports were written
// before they checked the settings).
func writeUnchecked(t *testing.T, home, id, export string) {
	t.Helper()
	_, evs, err := jsonl.Read(strings.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	s, err := badger.Open(filepath.Join(home, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := engine.Import(t.Context(), s, id, evs, nil); err != nil {
		t.Fatal(err)
	}
}
