package hostabi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Names and numbers of the binary ABI, shared by the wasm host and the
// guest kit. ABI.md is the prose behind them.
const (
	// ImportModule is the one module name host functions are imported from.
	ImportModule = "wagent"
	// WASIModule is the only other import module a guest may use, and only
	// for the functions in WASIAllowed.
	WASIModule = "wasi_snapshot_preview1"
	// ManifestSection is the name of the custom section holding the
	// manifest as JSON.
	ManifestSection = "wagent.manifest"
	// MarkerPrefix starts the name of the export that marks the module's
	// ABI major version: MarkerPrefix + "1" for v1. See Marker.
	MarkerPrefix = "wagent_abi_v"
	// HookExportPrefix starts the name of each hook handler export. See
	// HookExport.
	HookExportPrefix = "wagent_on_"
	// MemoryExport is the name of the exported linear memory.
	MemoryExport = "memory"
	// InitializeExport is the optional reactor initialiser, called once
	// after instantiation and before any handler.
	InitializeExport = "_initialize"
)

// Host functions of module "wagent" (ABI.md, "Host imports"). All
// parameters and results are i32.
const (
	// FuncView: view(buf, cap) -> len. Copies the call's view.
	FuncView = "view"
	// FuncMessage: message(index, buf, cap) -> len | NotFound.
	FuncMessage = "message"
	// FuncNote: note(key, key_len, buf, cap) -> len | NotFound.
	FuncNote = "note"
	// FuncEffects: effects(ptr, len) -> 0. Hands over a JSON array of effects.
	FuncEffects = "effects"
	// FuncLog: log(level, ptr, len) -> 0. A diagnostic line for the host's
	// bounded log; not an effect, not durable.
	FuncLog = "log"
	// FuncCapabilities (1.2): capabilities(buf, cap) -> len. Copies what
	// the op was granted, a Granted document.
	FuncCapabilities = "capabilities"
	// FuncHTTP (1.2): http_request(req, req_len, buf, cap) -> len. Makes
	// the HTTPRequest at [req, req+req_len) and copies the HTTPResponse.
	FuncHTTP = "http_request"
	// FuncExec (1.2): exec(req, req_len, buf, cap) -> len. Runs the
	// ExecRequest and copies the ExecResponse.
	FuncExec = "exec"
	// FuncResponse (1.2): response(buf, cap) -> len | NotFound. Copies the
	// last http_request or exec response of the call again, for a guest
	// whose buffer was too small (the request is not made again).
	FuncResponse = "response"
)

// Return values of host functions and handler exports.
const (
	// NotFound is returned by message and note when there is no such item.
	NotFound int32 = -1
	// StatusOK: the handler finished; the effects it handed over (none
	// means skip) are its answer.
	StatusOK int32 = 0
	// StatusError: the handler failed; the host records a fault of kind
	// "error" whose message is the handler's last log line at LogError.
	StatusError int32 = 1
)

// Log levels of the log host function.
const (
	LogDebug int32 = 0
	LogInfo  int32 = 1
	LogWarn  int32 = 2
	LogError int32 = 3
)

// Marker returns the name of the ABI marker export for major, e.g.
// "wagent_abi_v1".
func Marker(major int) string { return MarkerPrefix + strconv.Itoa(major) }

// HookExport returns the name of the export that handles hook h, e.g.
// "wagent_on_request_error" for "request-error". Its signature is
// (view_len i32) -> (status i32).
func HookExport(h Hook) string {
	return HookExportPrefix + strings.ReplaceAll(string(h), "-", "_")
}

// WASIAllowed lists the wasi_snapshot_preview1 functions a guest may
// import: what a reactor needs to start, print diagnostics and read a
// granted directory, and (ABI 1.2, WASIWrite) change files inside a
// read-write one. Clocks and randomness are served by the host
// deterministically; a guest gets no environment, no arguments and no
// sockets.
var WASIAllowed = append([]string{
	"args_get", "args_sizes_get", "environ_get", "environ_sizes_get",
	"clock_res_get", "clock_time_get", "random_get",
	"proc_exit", "sched_yield", "poll_oneoff",
	"fd_write", "fd_read", "fd_pread", "fd_close", "fd_seek", "fd_tell",
	"fd_fdstat_get", "fd_fdstat_set_flags", "fd_filestat_get",
	"fd_prestat_get", "fd_prestat_dir_name", "fd_readdir", "fd_advise",
	"path_open", "path_filestat_get", "path_readlink",
}, WASIWrite...)

// WASIWrite (1.2) are the functions that change files: they work only
// inside a read-write mount (anywhere else they fail with a read-only
// file system error), confined like os.Root.
var WASIWrite = []string{
	"fd_pwrite", "fd_sync", "fd_datasync",
	"fd_filestat_set_size",
	"path_create_directory", "path_remove_directory", "path_unlink_file",
	"path_rename", "path_link", "path_symlink", "path_filestat_set_times",
}

// ErrManifest is wrapped by every error DecodeManifest and Validate return.
var ErrManifest = errors.New("invalid manifest")

// ParseABI splits an ABI version "MAJOR.MINOR".
func ParseABI(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(s, ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("abi version %q is not MAJOR.MINOR", s)
	}
	return major, minor, nil
}

// ABIVersion is this package's ABI as "MAJOR.MINOR".
func ABIVersion() string { return strconv.Itoa(Major) + "." + strconv.Itoa(Minor) }

// DecodeManifest parses and validates a manifest. It first checks the ABI
// version (so a manifest from a later minor is refused for that reason,
// not for a field this host does not know), then decodes strictly.
func DecodeManifest(b []byte) (*Manifest, error) {
	var head struct {
		ABI string `json:"abi"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrManifest, err)
	}
	if err := checkABI(head.ABI); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := new(Manifest)
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: data after the manifest", ErrManifest)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Bundle is the manifest section of a module that carries several ops
// (ABI 1.1): {"abi": "1.1", "bundle": [MANIFEST, …]}. Each op is loaded
// by name and runs in its own instances; the guest tells them apart by
// View.Op. Bundling lets ops that ship together (wagent's built-ins) be
// compiled and loaded once.
type Bundle struct {
	ABI string     `json:"abi"`
	Ops []Manifest `json:"bundle"`
}

// DecodeManifests parses a manifest section: one manifest, or a bundle of
// several with distinct names. Each is validated as DecodeManifest does.
func DecodeManifests(b []byte) ([]*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d KiB", ErrManifest, len(b), MaxManifestBytes>>10)
	}
	if err := CheckDepth(b, MaxManifestDepth); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	var head struct {
		ABI    string          `json:"abi"`
		Bundle json.RawMessage `json:"bundle"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrManifest, err)
	}
	if head.Bundle == nil {
		m, err := DecodeManifest(b)
		if err != nil {
			return nil, err
		}
		return []*Manifest{m}, nil
	}
	if err := checkABI(head.ABI); err != nil {
		return nil, err
	}
	if _, minor, _ := ParseABI(head.ABI); minor < 1 {
		return nil, fmt.Errorf("%w: bundles need abi 1.1 or later, the section says %s", ErrManifest, head.ABI)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var raw struct {
		ABI string            `json:"abi"`
		Ops []json.RawMessage `json:"bundle"`
	}
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: bundle: %v", ErrManifest, err)
	}
	if len(raw.Ops) == 0 {
		return nil, fmt.Errorf("%w: the bundle lists no ops", ErrManifest)
	}
	seen := map[string]bool{}
	var out []*Manifest
	for i, r := range raw.Ops {
		m, err := DecodeManifest(r)
		if err != nil {
			return nil, fmt.Errorf("bundle op %d: %w", i+1, err)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%w: the bundle has two ops named %q", ErrManifest, m.Name)
		}
		seen[m.Name] = true
		out = append(out, m)
	}
	return out, nil
}

func checkABI(v string) error {
	if v == "" {
		return fmt.Errorf("%w: no abi version (want %q)", ErrManifest, ABIVersion())
	}
	major, minor, err := ParseABI(v)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if major != Major {
		return fmt.Errorf("%w: built for ABI %s, this host speaks ABI %s: rebuild the op for v%d", ErrManifest, v, ABIVersion(), Major)
	}
	if minor > Minor {
		return fmt.Errorf("%w: built for ABI %s, newer than this host's %s: upgrade wagent", ErrManifest, v, ABIVersion())
	}
	return nil
}

// Validate checks a manifest on its own: a name, an ABI this package
// speaks, at least one known hook and no duplicates, well-formed tool,
// command and mount names.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrManifest, fmt.Sprintf(format, args...))
	}
	if !validName(m.Name) {
		return bad("name %q must be 1-64 characters of a-z, A-Z, 0-9, '.', '_', '-'", m.Name)
	}
	if err := checkABI(m.ABI); err != nil {
		return err
	}
	if len(m.Hooks) == 0 {
		return bad("%s declares no hooks", m.Name)
	}
	seen := map[string]bool{}
	for _, h := range m.Hooks {
		if !h.Known() {
			return bad("unknown hook %q", h)
		}
		if seen["h:"+string(h)] {
			return bad("hook %q listed twice", h)
		}
		seen["h:"+string(h)] = true
	}
	for _, t := range m.Tools {
		if !validName(strings.TrimSuffix(t, "*")) {
			return bad("tool name %q must be 1-64 characters of a-z, A-Z, 0-9, '.', '_', '-' (a namespace ends in *)", t)
		}
		if seen["t:"+t] {
			return bad("tool %q listed twice", t)
		}
		seen["t:"+t] = true
	}
	for _, t := range m.Idempotent {
		if !seen["t:"+t] {
			return bad("idempotent tool %q is not among the op's tools", t)
		}
	}
	for _, c := range m.Commands {
		if !validName(c) {
			return bad("command %q must be 1-64 characters of a-z, A-Z, 0-9, '.', '_', '-' (no slash)", c)
		}
		if seen["c:"+c] {
			return bad("command %q listed twice", c)
		}
		seen["c:"+c] = true
	}
	for c, args := range m.CommandArgs {
		if !seen["c:"+c] {
			return bad("command_args names %q, which is not among the op's commands", c)
		}
		if len(args) > 200 || strings.ContainsAny(args, "\n\r") {
			return bad("command_args of %q must be one line of at most 200 bytes", c)
		}
	}
	if err := m.Capabilities.check(m.ABI); err != nil {
		return bad("%v", err)
	}
	if len(m.ConfigSchema) > 0 && !json.Valid(m.ConfigSchema) {
		return bad("config_schema is not JSON")
	}
	return nil
}

// CheckGuestPath checks a mount's path inside the guest: absolute, clean,
// and not the root.
func CheckGuestPath(p string) error {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("mount path %q must be an absolute, clean path other than /", p)
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
