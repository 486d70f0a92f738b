package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// An import by a principal other than the local user may record only
// itself as who chose a session's settings: a log it brings in must not
// make its sessions trusted as the local user's. The local user may
// import any.
func TestCheckImportPrincipal(t *testing.T) {
	for _, exposed := range []bool{false, true} {
		n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(string) string { return "" }, Exposed: exposed})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			by     Principal
			raw    string
			refuse string
		}{
			{Remote, `{"v":1,"provider":"openai","model":"m","by":"local"}`, `the settings say they were chosen by local; an import by remote may only record its own`},
			{Remote, `{"v":1,"provider":"openai","model":"m","by":"remote:bob"}`, `chosen by remote:bob`},
			{Remote, `{"v":1,"provider":"openai","model":"m","by":"remote"}`, ""},
			{Principal{Kind: KindRemote, Name: "alice"}, `{"v":1,"provider":"openai","model":"m","by":"remote:alice"}`, ""},
			{Remote, `{"v":2,"provider":"openai","model":"m","by":"remote"}`, "upgrade wagent"},
			{Local, `{"v":1,"provider":"openai","model":"m","by":"local"}`, ""},
			{Local, `{"v":1,"provider":"openai","model":"m","by":"remote"}`, ""},
			{Local, `{"provider":"openai","model":"m"}`, ""},
		} {
			err := n.CheckImport(c.by)(&event.SessionCreated{Settings: json.RawMessage(c.raw)})
			if c.refuse == "" && err != nil || c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse) || strings.Contains(err.Error(), "\n")) {
				t.Errorf("exposed %v: import of %s by %s: %v, want refused with %q", exposed, c.raw, c.by, err, c.refuse)
			}
		}
		// Settings naming no principal: an exposed node opens them as a
		// remote client's, so a remote import may bring them; a node no
		// remote client reaches would open them as the local user's.
		for _, raw := range []string{`{"provider":"openai","model":"m"}`, ``} { // no settings at all too
			err = n.CheckImport(Remote)(&event.SessionCreated{Settings: json.RawMessage(raw)})
			if exposed && err != nil || !exposed && (err == nil || !strings.Contains(err.Error(), `must record its own (by: "remote")`)) {
				t.Errorf("exposed %v: a remote import of settings %q naming no principal: %v", exposed, raw, err)
			}
		}
		n.Close(context.Background())
	}
}

// A create records who asked, whatever the request's settings say.
func TestPrepareRecordsWhoAsked(t *testing.T) {
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(string) string { return "" }, Exposed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	for _, c := range []struct {
		p    Principal
		raw  string
		want string
	}{
		{Remote, `{"provider":"openai","model":"m","by":"local"}`, "remote"},
		{Remote, `{"provider":"openai","model":"m","by":"remote:someone-else","v":1}`, "remote"},
		{Principal{Kind: KindRemote, Name: "alice"}, `{"provider":"openai","model":"m","by":"local"}`, "remote:alice"},
		{Local, `{"provider":"openai","model":"m","by":"remote"}`, "local"},
		{Local, `{"provider":"openai","model":"m"}`, "local"},
	} {
		info, err := n.Prepare(context.Background(), c.p, Request{Settings: json.RawMessage(c.raw)})
		if err != nil {
			t.Fatalf("Prepare by %s of %s: %v", c.p, c.raw, err)
		}
		s, err := ReadSettings(info.Settings)
		if err != nil {
			t.Fatal(err)
		}
		if s.By != c.want || s.Version != SettingsVersion {
			t.Errorf("Prepare by %s of %s recorded %s, want by %q and v %d", c.p, c.raw, info.Settings, c.want, SettingsVersion)
		}
	}
}

// Who chose a session's settings decides what its open may do on a node
// remote clients reach: the local user's session may run a pipeline file
// anywhere and send the node's key to any base URL; a remote client's
// neither, and says so in one line, Forbidden. On a shared store no
// principal the settings record is believed.
func TestPrincipalDecidesFilesAndKeys(t *testing.T) {
	base := t.TempDir()
	projects := filepath.Join(base, "projects")
	elsewhere := filepath.Join(base, "elsewhere")
	for _, d := range []string{projects, elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yaml := []byte("ops:\n  - use: builtin:max-turns\n")
	outsidePipe, insidePipe := filepath.Join(elsewhere, "p.yaml"), filepath.Join(projects, "p.yaml")
	for _, p := range []string{outsidePipe, insidePipe} {
		if err := os.WriteFile(p, yaml, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"WAGENT_HOME": base, "WAGENT_PROJECT_ROOTS": projects, "OPENAI_API_KEY": "sk-node"}
	getenv := func(k string) string { return vars[k] }
	exposed := driveNode(t, Options{Getenv: getenv, Exposed: true})
	shared := driveNode(t, Options{Getenv: getenv, SharedLog: true})
	const evil = "http://evil.example/v1"
	for _, c := range []struct {
		name   string
		n      *Node
		s      Settings
		key    string // the client's own key
		refuse string // "" for allowed
	}{
		{"local: a pipeline outside the roots and an untrusted base URL", exposed, Settings{By: "local", Pipeline: outsidePipe, BaseURL: evil}, "", ""},
		{"remote: a pipeline outside the roots", exposed, Settings{By: "remote", Pipeline: outsidePipe}, "", "WAGENT_PROJECT_ROOTS"},
		{"remote: an untrusted base URL", exposed, Settings{By: "remote", Pipeline: insidePipe, BaseURL: evil}, "", "WAGENT_TRUSTED_BASE_URLS"},
		{"remote: an untrusted base URL with the client's own key", exposed, Settings{By: "remote", Pipeline: insidePipe, BaseURL: evil}, "sk-client", ""},
		{"remote: a pipeline under the roots, the default base URL", exposed, Settings{By: "remote", Pipeline: insidePipe}, "", ""},
		{"no principal on an exposed node: a pipeline outside the roots", exposed, Settings{Pipeline: outsidePipe}, "", "WAGENT_PROJECT_ROOTS"},
		{"no principal on an exposed node: an untrusted base URL", exposed, Settings{Pipeline: insidePipe, BaseURL: evil}, "", "WAGENT_TRUSTED_BASE_URLS"},
		{"shared store, local claimed: a pipeline outside the roots", shared, Settings{By: "local", Pipeline: outsidePipe}, "", "WAGENT_PROJECT_ROOTS"},
		{"shared store, local claimed: an untrusted base URL", shared, Settings{By: "local", Pipeline: insidePipe, BaseURL: evil}, "", "WAGENT_TRUSTED_BASE_URLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			s.Version, s.Provider, s.Model = SettingsVersion, "openai", "m"
			raw, _ := json.Marshal(s)
			id := strings.NewReplacer(" ", "-", ":", "", ",", "").Replace(c.name)
			if c.key != "" {
				c.n.SwapSecrets(id, map[string]string{SecretAPIKey: c.key})
				defer c.n.SwapSecrets(id, nil)
			}
			cfg, err := c.n.Resolve(context.Background(), id, &event.SessionCreated{Settings: raw})
			if c.refuse == "" {
				if err != nil || cfg.Pipeline == nil || cfg.Provider == nil {
					t.Fatalf("open of %s: %+v, %v", raw, cfg, err)
				}
				return
			}
			if err == nil || ReasonOf(err) != Forbidden || !strings.Contains(err.Error(), c.refuse) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "sk-node") {
				t.Errorf("open of %s: %v (%v), want one Forbidden line with %q", raw, err, ReasonOf(err), c.refuse)
			}
		})
	}
	// The same when the session is created.
	for _, c := range []struct {
		p      Principal
		s      Settings
		refuse string
	}{
		{Local, Settings{Pipeline: outsidePipe, BaseURL: evil}, ""},
		{Remote, Settings{Pipeline: outsidePipe}, "WAGENT_PROJECT_ROOTS"},
		{Remote, Settings{Pipeline: insidePipe, BaseURL: evil}, "WAGENT_TRUSTED_BASE_URLS"},
		{Remote, Settings{Pipeline: insidePipe}, ""},
	} {
		s := c.s
		s.Provider, s.Model = "openai", "m"
		raw, _ := json.Marshal(s)
		_, err := exposed.Prepare(context.Background(), c.p, Request{Settings: raw})
		if c.refuse == "" && err != nil || c.refuse != "" && (err == nil || ReasonOf(err) != Forbidden || !strings.Contains(err.Error(), c.refuse) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("create by %s of %s: %v (%v), want refused with %q", c.p, raw, err, ReasonOf(err), c.refuse)
		}
	}
}
