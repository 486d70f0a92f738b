package jetstream

import (
	"errors"
	"strings"
	"testing"

	"github.com/wagent/wagent/store"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want serverVersion
		ok   bool
	}{
		{"2.9.10", serverVersion{2, 9, 10}, true},
		{"v2.12.0", serverVersion{2, 12, 0}, true},
		{"2.11.0-RC.1", serverVersion{2, 11, 0}, true},
		{"2.10.4-beta+build", serverVersion{2, 10, 4}, true},
		{" 2.15.2 ", serverVersion{2, 15, 2}, true},
		{"", serverVersion{}, false},
		{"2.12", serverVersion{}, false},
		{"2.12.0.1", serverVersion{}, false},
		{"2.x.0", serverVersion{}, false},
		{"2..0", serverVersion{}, false},
		{"2.-1.0", serverVersion{}, false},
		{"custom", serverVersion{}, false},
	} {
		got, ok := parseVersion(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseVersion(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	ordered := []serverVersion{{2, 2, 0}, {2, 9, 0}, {2, 9, 10}, {2, 10, 0}, {2, 11, 9}, {2, 12, 0}, {2, 15, 2}, {3, 0, 0}}
	for i, a := range ordered {
		for j, b := range ordered {
			if got, want := a.less(b), i < j; got != want {
				t.Errorf("%v.less(%v) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestCheckVersion(t *testing.T) {
	const url = "nats://127.0.0.1:4222"
	for _, c := range []struct {
		version string
		want    string // "" for no error
	}{
		{"2.15.2", ""},
		{"2.12.0", ""},
		{"2.12.0-RC.3", ""},
		{"3.0.0", ""},
		{"custom-build", ""}, // left to the API level
		{"2.11.9", "nats-server at nats://127.0.0.1:4222 is 2.11.9; the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later): " + installHint},
		{"2.9.10", "nats-server at nats://127.0.0.1:4222 is 2.9.10; the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later): " + installHint},
		{"2.8.4", "nats-server at nats://127.0.0.1:4222 is 2.8.4; the store needs direct gets (allow_direct) on the log stream (nats-server 2.9.0 or later): " + installHint},
	} {
		err := checkVersion(url, c.version)
		if c.want == "" {
			if err != nil {
				t.Errorf("checkVersion(%q) = %v, want nil", c.version, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("checkVersion(%q) = nil, want %q", c.version, c.want)
			continue
		}
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("checkVersion(%q) = %v, want store.ErrInvalid", c.version, err)
		}
		if got := strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "); got != c.want {
			t.Errorf("checkVersion(%q):\n got %s\nwant %s", c.version, got, c.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("checkVersion(%q): the error spans lines: %q", c.version, err)
		}
	}
}

func TestCheckAPILevel(t *testing.T) {
	if err := checkAPILevel("nats://h:4222", "custom", 2); err != nil {
		t.Errorf("level 2: %v", err)
	}
	if err := checkAPILevel("nats://h:4222", "custom", 5); err != nil {
		t.Errorf("level 5: %v", err)
	}
	err := checkAPILevel("nats://h:4222", "custom", 1)
	want := `nats-server at nats://h:4222 is "custom" (JetStream API level 1); the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later)`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("level 1: got %v, want it to contain %q", err, want)
	}
}

// MinServerVersion, which the README states, is the newest release the
// requirements name.
func TestMinServerVersion(t *testing.T) {
	var newest serverVersion
	for _, r := range requirements {
		if newest.less(r.version) {
			newest = r.version
		}
	}
	if MinServerVersion != newest.String() {
		t.Errorf("MinServerVersion = %s, the requirements need %s: update it and the README's NATS section", MinServerVersion, newest)
	}
}

// parseVersion reads what a server sends: whatever it accepts prints back
// as a version it reads the same, and nothing makes it panic.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"2.9.10", "v2.12.0", "2.11.0-RC.1", "", "2..0", "-1.2.3", "2.+1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseVersion(s)
		if !ok {
			return
		}
		if w, ok := parseVersion(v.String()); !ok || w != v {
			t.Errorf("parseVersion(%q) = %v, which reads back as %v, %v", s, v, w, ok)
		}
	})
}
