package app

import (
	"strings"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/anthropic"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/engine/provider/script"
)

// ProviderFactory makes a provider from a session's settings and the API
// key to use ("" for none).
type ProviderFactory func(s Settings, key string, getenv func(string) string) (provider.Provider, error)

// builtinProviders are the providers every node knows.
var builtinProviders = map[string]ProviderFactory{
	"openai": func(s Settings, key string, getenv func(string) string) (provider.Provider, error) {
		cfg := openai.Config{BaseURL: s.BaseURL, APIKey: key, Model: s.Model}
		if cfg.BaseURL == "" {
			cfg.BaseURL = getenv("OPENAI_BASE_URL")
		}
		p, err := openai.New(cfg)
		if err != nil {
			return nil, Errorf(Invalid, "%v", err)
		}
		return p, nil
	},
	"anthropic": func(s Settings, key string, getenv func(string) string) (provider.Provider, error) {
		cfg := anthropic.ConfigFromEnv()
		cfg.Model = s.Model
		if s.BaseURL != "" {
			cfg.BaseURL = s.BaseURL
		} else {
			cfg.BaseURL = getenv("ANTHROPIC_BASE_URL")
		}
		cfg.APIKey = key
		p, err := anthropic.New(cfg)
		if err != nil {
			return nil, Errorf(Invalid, "%v", err)
		}
		return p, nil
	},
	"script": func(s Settings, _ string, _ func(string) string) (provider.Provider, error) {
		p, err := script.Load(s.Script)
		if err != nil {
			return nil, Errorf(Failed, "%v", err)
		}
		return p, nil
	},
}

// buildProvider makes the settings' provider. key, if set, is the API key
// a client handed over; otherwise the node's environment's, which goes
// only where pol lets it (see Node.trustedBaseURL).
func (n *Node) buildProvider(s Settings, key string, pol Policy) (provider.Provider, error) {
	name := s.ProviderName()
	if _, builtin := builtinProviders[name]; !builtin {
		// A provider the embedder registered is handed no key of ours.
		f, ok := n.providers[name]
		if !ok {
			return nil, Errorf(Invalid, "unknown provider %q: this process knows %s", name, strings.Join(n.providerNames(), ", "))
		}
		return f(s, key, n.getenv)
	}
	if !pol.AnyBaseURL && key == "" && name != "script" {
		if env := s.KeyEnv(); n.getenv(env) != "" && !n.trustedBaseURL(s.BaseURL) {
			return nil, Errorf(Forbidden, "the session's base URL %s is not one this process sends its $%s to (a session's creator chose it): add it to WAGENT_TRUSTED_BASE_URLS in this process's environment, or have the client pass its own key", s.BaseURL, env)
		}
	}
	if key == "" && name != "script" {
		key = n.getenv(s.KeyEnv())
		if key == "" && n.o.Drive && n.defaultBaseURL(s) {
			return nil, n.missingKey(s)
		}
	}
	f, ok := n.providers[name]
	if !ok {
		return nil, Errorf(Invalid, "unknown provider %q: this process knows %s", name, strings.Join(n.providerNames(), ", "))
	}
	return f(s, key, n.getenv)
}

// defaultBaseURL says whether the settings' provider talks to its
// vendor's own API (no base URL, or the vendor's), which refuses every
// request without a key. A local server (Ollama, llama.cpp) needs none.
func (n *Node) defaultBaseURL(s Settings) bool {
	u, def := s.BaseURL, openai.DefaultBaseURL
	if s.ProviderName() == "anthropic" {
		def = anthropic.DefaultBaseURL
		if u == "" {
			u = n.getenv("ANTHROPIC_BASE_URL")
		}
	} else if u == "" {
		u = n.getenv("OPENAI_BASE_URL")
	}
	u = strings.TrimRight(strings.TrimSpace(u), "/")
	return u == "" || u == strings.TrimRight(def, "/")
}

// missingKey says, before any request is sent, which variable to set
// and where it was looked for.
func (n *Node) missingKey(s Settings) error {
	why := "the provider's default variable"
	if s.APIKeyEnv != "" {
		why = "named by api_key_env"
	}
	return Errorf(Invalid, "no API key for provider %s: set %s (%s; looked for in this process's environment), or set base_url to a server that needs no key",
		s.ProviderName(), s.KeyEnv(), why)
}

// trustedBaseURL says whether u is a base URL this node sends its own
// API keys to: none (the provider's default or the node's own
// *_BASE_URL), the providers' defaults, the node's OPENAI_BASE_URL or
// ANTHROPIC_BASE_URL, a base URL its config file names, or one listed,
// comma-separated, in WAGENT_TRUSTED_BASE_URLS.
func (n *Node) trustedBaseURL(u string) bool {
	u = strings.TrimRight(u, "/")
	if u == "" {
		return true
	}
	trusted := []string{openai.DefaultBaseURL, anthropic.DefaultBaseURL, n.getenv("OPENAI_BASE_URL"), n.getenv("ANTHROPIC_BASE_URL")}
	trusted = append(trusted, strings.Split(n.getenv("WAGENT_TRUSTED_BASE_URLS"), ",")...)
	if cfg := n.o.Config; cfg != nil {
		trusted = append(trusted, cfg.Top.BaseURL)
		for _, p := range cfg.Profiles {
			trusted = append(trusted, p.BaseURL)
		}
	}
	for _, t := range trusted {
		if t = strings.TrimRight(strings.TrimSpace(t), "/"); t != "" && t == u {
			return true
		}
	}
	return false
}

// FixedProvider is a factory that answers every session with p (a
// provider built in code, a scripted one in tests).
func FixedProvider(p provider.Provider) ProviderFactory {
	return func(Settings, string, func(string) string) (provider.Provider, error) { return p, nil }
}
