package jetstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string
		want storeURL
	}{
		{"defaults", "", nil, storeURL{servers: nats.DefaultURL}},
		{"NATS_URL", "?stream=S", map[string]string{"NATS_URL": "nats://n:4222"}, storeURL{servers: "nats://n:4222", opts: Options{Stream: "S"}}},
		{"every option", "nats://h:1?stream=S&subject=a.b&replicas=3&storage=memory&max_append_bytes=1000&timeout=2s&election_wait=1m", nil,
			storeURL{servers: "nats://h:1", opts: Options{Stream: "S", Subject: "a.b", Replicas: 3, Storage: MemoryStorage, MaxAppendBytes: 1000, Timeout: 2 * time.Second, ElectionWait: time.Minute}}},
		{"several servers", "nats://a:1,tls://b:2?replicas=3", nil, storeURL{servers: "nats://a:1,tls://b:2", opts: Options{Replicas: 3}}},
		{"creds in the URL", "nats://h:1?creds=/x.creds", map[string]string{"NATS_CREDS": "/env.creds"},
			storeURL{servers: "nats://h:1", auth: urlAuth{Creds: "/x.creds"}}},
		{"creds from the environment", "nats://h:1", map[string]string{"NATS_CREDS": "/env.creds", "NATS_USER": "u"},
			storeURL{servers: "nats://h:1", auth: urlAuth{Creds: "/env.creds"}}},
		{"nkey", "nats://h:1", map[string]string{"NATS_NKEY": "/seed", "NATS_USER": "u"}, storeURL{servers: "nats://h:1", auth: urlAuth{Nkey: "/seed"}}},
		{"user and password", "nats://h:1", map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p"},
			storeURL{servers: "nats://h:1", auth: urlAuth{User: "u", Password: "p"}}},
		{"user alone is a token", "nats://h:1", map[string]string{"NATS_USER": "tok"}, storeURL{servers: "nats://h:1", auth: urlAuth{Token: "tok"}}},
		{"the URL's own user wins over the environment", "nats://me:pw@h:1", map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p", "NATS_CREDS": "/env.creds"},
			storeURL{servers: "nats://me:pw@h:1"}},
		{"TLS files", "nats://h:1", map[string]string{"NATS_CERT": "/c.pem", "NATS_KEY": "/k.pem", "NATS_CA": "/ca.pem"},
			storeURL{servers: "nats://h:1", auth: urlAuth{Cert: "/c.pem", Key: "/k.pem", CA: "/ca.pem"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseURL(tc.url, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatalf("parseURL: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(storeURL{})); diff != "" {
				t.Errorf("parseURL(%q) mismatch (-want +got):\n%s", tc.url, diff)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, tc := range []struct {
		url  string
		env  map[string]string
		want string
	}{
		{"nats://h:1?strem=S", nil, `unknown option "strem"`},
		{"nats://h:1?stream=A&stream=B", nil, "stream is given 2 times"},
		{"nats://h:1?replicas=x", nil, "replicas"},
		{"nats://h:1?max_append_bytes=x", nil, "max_append_bytes"},
		{"nats://h:1?timeout=5", nil, "timeout"},
		{"nats://h:1?election_wait=30", nil, "election_wait"},
		{"nats://h:1?storage=disk", nil, "storage"},
		{"nats://h:1?replicas=9", nil, "replicas 9"},
		{"http://h:1", nil, "scheme"},
		{"localhost", nil, "not a URL"},
		{"nats://", nil, "not a URL"},
		{"nats://h:1", map[string]string{"NATS_CERT": "/c.pem"}, "NATS_CERT and NATS_KEY"},
		{"nats://u:hunter2@h:1?bad=1", nil, "nats://u:xxxxx@h:1"},
		{"nats://hunter2@h:1?bad=1", nil, "nats://xxxxx@h:1"},
		// A secret url.Parse cannot read (a stray %, a space) is hidden
		// too, though the URL is not parsed.
		{"nats://u:hunter2%zz@h:1", nil, "nats://xxxxx@h:1"},
		{"nats://hunter2 x@h:1", nil, "nats://xxxxx@h:1"},
		{"nats://a:1,nats://u:hunter2%@h:1?bad=1", nil, "nats://a:1,nats://xxxxx@h:1"},
	} {
		_, err := parseURL(tc.url, func(k string) string { return tc.env[k] })
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseURL(%q): got %v, want ErrInvalid saying %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("parseURL(%q): the error shows the secret: %v", tc.url, err)
		}
	}
}

func TestNatsOptions(t *testing.T) {
	u := storeURL{auth: urlAuth{Token: "tok"}}
	opts, err := u.natsOptions()
	if err != nil {
		t.Fatal(err)
	}
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.Token != "tok" || o.MaxReconnect != -1 || o.Name != "wagent store" {
		t.Errorf("options: token %q, max reconnects %d, name %q; want tok, -1 (a worker outlives a server restart), wagent store", o.Token, o.MaxReconnect, o.Name)
	}
	if _, err := (storeURL{auth: urlAuth{Nkey: "/no/such/seed"}}).natsOptions(); err == nil || !strings.Contains(err.Error(), "NATS_NKEY") {
		t.Errorf("a missing nkey seed file: got %v, want an error naming NATS_NKEY", err)
	}
}
