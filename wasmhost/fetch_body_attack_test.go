package wasmhost

import (
	"bytes"
	"compress/gzip"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// What fetch does with bodies that are not the text it expects: a small
// gzip body that inflates to a gigabyte, and binary files. Every server is
// on loopback, granted by name.

// bombBytes is what each bomb inflates to.
const bombBytes = 1 << 30

// bombServer serves gzip bombs, compressed as they are sent (never held in
// memory): /zeros (a gigabyte of NULs, about 1 MB compressed, declared
// text/html) and /text (a gigabyte of one line, declared text/plain). What
// each handler wrote before it stopped (the bytes before compression)
// arrives on the channel: all of them only if the client read the whole
// bomb.
func bombServer(t *testing.T) (*httptest.Server, <-chan int64) {
	t.Helper()
	written := make(chan int64, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		ctype := "text/html"
		if r.URL.Path == "/text" {
			copy(chunk, bytes.Repeat([]byte("All work and no play makes Jack a dull boy.\n"), len(chunk)/44+1))
			ctype = "text/plain"
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Encoding", "gzip")
		n := int64(0)
		defer func() { written <- n }()
		zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
		for n < bombBytes && r.Context().Err() == nil {
			if _, err := zw.Write(chunk); err != nil {
				return // the client went away
			}
			n += int64(len(chunk))
		}
		zw.Close()
	}))
	t.Cleanup(srv.Close)
	return srv, written
}

// A gzip bomb through the fetch built-in: the host inflates at most its
// limit plus one byte (2 MiB by default), the op answers with what it
// kept and says where and why the body was cut, nothing faults, the
// server is cut off long before the gigabyte, and the host's memory does
// not follow the bomb.
func TestFetchGzipBombStopsAtTheLimit(t *testing.T) {
	srv, written := bombServer(t)
	op := fetchOp(t, Limits{}, hostOf(srv.URL))
	for _, tc := range []struct {
		path, want, log string
	}{
		{"/zeros", srv.URL + "/zeros (HTTP 200, text/html)\n\nbinary body: application/octet-stream, more than 2097152 bytes after gzip decoding (not shown)",
			" → 200 (2097152 bytes, gzip decoded, not text: application/octet-stream, not passed on, cut at the limit of 2097152 bytes, "},
		{"/text", "\n… (cut at 100000 bytes of text; the response was longer than the host reads: it kept its first 2097152 bytes after gzip decoding; this is its beginning)",
			" → 200 (2097152 bytes, gzip decoded, cut at the limit of 2097152 bytes, "},
	} {
		t.Run(tc.path, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			r, logs := runCall(t, op, "fetch", `{"url":"`+srv.URL+tc.path+`"}`) // a fault fails here
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if r.IsError || !strings.HasSuffix(r.Content, tc.want) {
				t.Errorf("result (%d bytes) ends %q\nwant it to end %q", len(r.Content), r.Content[max(0, len(r.Content)-300):], tc.want)
			}
			if tc.path == "/text" && (!strings.HasPrefix(r.Content, srv.URL+"/text (HTTP 200, text/plain)\n\nAll work and no play makes Jack a dull boy.\nAll work") || len(r.Content) > 100_000+400) {
				t.Errorf("text result: %d bytes, begins %.200q", len(r.Content), r.Content)
			}
			if len(logs) != 1 || !strings.Contains(logs[0], tc.log) {
				t.Errorf("live lines %q\nwant one containing %q", logs, tc.log)
			}
			// The server stops when the host hangs up after limit+1
			// bytes: it has written a sliver of the gigabyte (what the
			// socket buffers took at once), not all of it.
			if n := <-written; n >= bombBytes {
				t.Errorf("the server wrote the whole bomb (%d bytes): the host read it all", n)
			}
			// Everything the process allocated during the call, the
			// guest's growing memory and the server's compressor
			// included: tens of MiB (about 70 for the text, which the
			// guest gets), where inflating the bomb would be a GiB.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > bombBytes/4 {
				t.Errorf("the process allocated %d MiB during the call", grew>>20)
			}
			t.Logf("%s: %v, %d MiB allocated", tc.path, took, (after.TotalAlloc-before.TotalAlloc)>>20)
		})
	}

	// A guest that asks for an encoding itself gets the body as it came:
	// not decoded, counted before decoding, and not text.
	raw := newOp(t, capsModule(t), Config{Op: "caps-net", Limits: Limits{MemoryPages: 256, Timeout: 5 * time.Second}, Grants: Grants{HTTP: []string{hostOf(srv.URL)}}})
	var resp hostabi.HTTPResponse
	hostabi.ParseHTTPResponse([]byte(command(t, raw, "http", `{"url":"`+srv.URL+`/zeros","headers":{"Accept-Encoding":"gzip"},"max_bytes":1000}`)), &resp)
	if want := (hostabi.HTTPResponse{Status: 200, Size: 1000, Truncated: true, Binary: "application/x-gzip"}); resp.Status != want.Status || resp.Size != want.Size || resp.Truncated != want.Truncated ||
		resp.Binary != want.Binary || resp.Decoded != "" || resp.Body != "" || resp.Headers["Content-Encoding"] != "gzip" {
		t.Errorf("gzip asked for by the guest: %+v", resp)
	}
	<-written
}

// A binary body comes back as one line saying what it is and how big,
// judged by its first bytes as well as by its Content-Type, and the host
// hands the guest none of its bytes. Text, including text that is not
// UTF-8 under a text type and text served as application/octet-stream,
// comes back as text.
func TestFetchDescribesBinaryBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 1<<20)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	img := image.NewRGBA(image.Rect(0, 0, 300, 300))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32()) | 1
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var pngBuf bytes.Buffer
	png.Encode(&pngBuf, img)
	pngBytes := pngBuf.Bytes()
	pages := map[string]struct {
		ctype string
		body  []byte
	}{
		"/image.png":     {"image/png", pngBytes},
		"/png-as-html":   {"text/html; charset=utf-8", pngBytes},
		"/noise":         {"application/octet-stream", noise},
		"/noise-as-text": {"text/plain", noise},
		"/doc.pdf":       {"application/pdf", append([]byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), noise[:5000]...)},
		"/huge.bin":      {"application/octet-stream", bytes.Repeat(noise, 3)},
		"/brotli":        {"text/html", noise[:300]}, // Content-Encoding br, which the host never asked for
		"/plain":         {"text/plain; charset=utf-8", []byte("plain text, é\n")},
		"/latin1":        {"text/html; charset=iso-8859-1", []byte("<p>caf\xe9 cr\xe8me</p>")},
		"/json":          {"application/json", []byte(`{"a": [1, 2]}`)},
		"/text-as-bytes": {"application/octet-stream", []byte("package main\n\nfunc main() {}\n")},
		"/empty":         {"image/png", nil},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pages[r.URL.Path]
		w.Header().Set("Content-Type", p.ctype)
		if r.URL.Path == "/brotli" {
			w.Header().Set("Content-Encoding", "br")
		}
		w.Write(p.body)
	}))
	defer srv.Close()
	op := fetchOp(t, Limits{}, hostOf(srv.URL))
	for _, tc := range []struct{ path, want string }{
		{"/image.png", "(HTTP 200, image/png)\n\nbinary body: image/png, " + strconv.Itoa(len(pngBytes)) + " bytes (not shown)"},
		{"/png-as-html", "(HTTP 200, text/html)\n\nbinary body: image/png, " + strconv.Itoa(len(pngBytes)) + " bytes (not shown)"},
		{"/noise", "(HTTP 200, application/octet-stream)\n\nbinary body: application/octet-stream, 1048576 bytes (not shown)"},
		{"/noise-as-text", "(HTTP 200, text/plain)\n\nbinary body: application/octet-stream, 1048576 bytes (not shown)"},
		{"/doc.pdf", "(HTTP 200, application/pdf)\n\nbinary body: application/pdf, 5015 bytes (not shown)"},
		{"/huge.bin", "(HTTP 200, application/octet-stream)\n\nbinary body: application/octet-stream, more than 2097152 bytes (not shown)"},
		{"/brotli", "(HTTP 200, text/html)\n\nbinary body: application/octet-stream, 300 bytes, Content-Encoding br not decoded (not shown)"},
		{"/plain", "(HTTP 200, text/plain)\n\nplain text, é\n"},
		{"/latin1", "(HTTP 200, text/html)\n\ncaf\uFFFD cr\uFFFDme"},
		{"/json", "(HTTP 200, application/json)\n\n" + `{"a": [1, 2]}`},
		{"/text-as-bytes", "(HTTP 200, application/octet-stream)\n\npackage main\n\nfunc main() {}\n"},
		{"/empty", "(HTTP 200, image/png)\n\n"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r, _ := runCall(t, op, "fetch", `{"url":"`+srv.URL+tc.path+`"}`)
			if want := srv.URL + tc.path + " " + tc.want; r.IsError || r.Content != want {
				t.Errorf("result %q\nwant      %q", r.Content, want)
			}
		})
	}
	// What the guest receives: the type and the size, not the bytes.
	raw := newOp(t, capsModule(t), Config{Op: "caps-net", Limits: Limits{MemoryPages: 256, Timeout: 5 * time.Second}, Grants: Grants{HTTP: []string{hostOf(srv.URL)}}})
	reply := command(t, raw, "http", `{"url":"`+srv.URL+`/noise"}`)
	var resp hostabi.HTTPResponse
	hostabi.ParseHTTPResponse([]byte(reply), &resp)
	if resp.Status != 200 || resp.Binary != "application/octet-stream" || resp.Size != 1<<20 || resp.Truncated || resp.Body != "" || len(reply) > 1024 {
		t.Errorf("raw response to a binary body (%d bytes): %+v", len(reply), resp)
	}
}
