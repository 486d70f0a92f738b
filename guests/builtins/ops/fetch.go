package ops

import (
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Fetch gives the model a fetch tool: GET a URL on a host the pipeline
// grants (grants: {http: ["docs.example.com"]}) and answer with its text,
// HTML reduced to readable text (headings, paragraphs, list items and
// links kept; scripts, styles and markup dropped), bounded in size. The
// host checks the host and every redirect against the grant; a host not
// granted is an error result naming what is. The tool only reads, so it
// is idempotent.
//
// The host reads at most the op's limits.http_kb of a body (2 MiB),
// counted after it inflates a gzip body (it asks for gzip itself and
// decodes it; no other coding is asked for), so a small compressed body
// that inflates to gigabytes stops there: the result says the response
// was cut and how many bytes, after decoding, were kept. A body that is
// not text (an image, a PDF, an archive, bytes with NULs or control codes,
// judged by its Content-Type and its first KB) is not passed to the op at
// all: the result is one line, "binary body: image/png, 1048576 bytes (not
// shown)".
//
// Config: max_bytes [100000] (of text in a result), raw [false] (HTML as
// it came).
func Fetch() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "fetch",
			Version:      "1.0.0",
			Capabilities: hostabi.Capabilities{HTTP: []string{hostabi.AnyHost}},
			ConfigSchema: strictSchema(`"max_bytes":{"type":"integer","minimum":1024,"maximum":1048576},"raw":{"type":"boolean"}`),
		},
		Tools: []pdk.OwnedTool{
			pdk.Tool(hostabi.ToolSpec{Name: "fetch", Annotations: &hostabi.ToolAnnotations{ReadOnly: true, Idempotent: true, OpenWorld: true},
				Description: "Fetch a web page or file by URL (GET) and return its text; HTML is reduced to readable text, and a binary file (an image, a PDF, an archive) is only described by its type and size. Only some hosts are reachable."},
				fetchURL, pdk.Idempotent(), pdk.OfferWith(describeFetch)),
		},
	}
}

type fetchConfig struct {
	MaxBytes int  `json:"max_bytes"`
	Raw      bool `json:"raw"`
}

var fetchCache configCache[fetchConfig]

func parseFetch(raw []byte) (fetchConfig, error) {
	c := fetchConfig{MaxBytes: 100_000}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("fetch: %v", err)
	}
	return c, nil
}

// describeFetch tells the model which hosts it can reach.
func describeFetch(c *pdk.Call, spec *hostabi.ToolSpec) bool {
	if g := c.Granted(); len(g.HTTP) > 0 {
		spec.Description += " Reachable hosts: " + strings.Join(g.HTTP, ", ") + " (a bare host means ports 80 and 443; * any public host)."
	}
	return true
}

type fetchArgs struct {
	URL      string
	MaxBytes int
}

func (a *fetchArgs) Fields(f *pdk.Fields) {
	f.String("url", &a.URL).Required().Describe("an absolute http or https URL")
	f.Int("max_bytes", &a.MaxBytes).Describe("at most this many bytes of text")
}

func fetchURL(c *pdk.Call, a fetchArgs) (string, error) {
	cfg, err := fetchCache.get(c.RawConfig(), parseFetch)
	if err != nil {
		return "", err
	}
	limit := cfg.MaxBytes
	if a.MaxBytes > 0 {
		limit = min(limit, a.MaxBytes)
	}
	resp := c.HTTP(hostabi.HTTPRequest{Method: "GET", URL: a.URL, Headers: map[string]string{"Accept": "text/html, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5"}})
	if resp.Error != "" {
		return "", fmt.Errorf("%s", strings.TrimPrefix(resp.Error, "http_request: "))
	}
	ctype := resp.Headers["Content-Type"]
	media, _, _ := mime.ParseMediaType(ctype)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (HTTP %d", quoted(resp.URL), resp.Status)
	if media != "" {
		b.WriteString(", " + media)
	}
	b.WriteString(")\n\n")
	switch {
	case resp.Binary != "":
		// The host judged the body not text and kept none of it.
		b.WriteString(binaryNote(&resp))
	case (media == "text/html" || media == "application/xhtml+xml") && !cfg.Raw:
		writeText(&b, htmlText(resp.Body), limit, &resp)
	default:
		writeText(&b, resp.Body, limit, &resp)
	}
	if resp.Status >= 400 {
		return "", fmt.Errorf("%s", b.String())
	}
	return b.String(), nil
}

// writeText writes text cut to limit bytes, saying where it was cut: at
// the limit of text, or where the host stopped reading the body.
func writeText(b *strings.Builder, text string, limit int, resp *hostabi.HTTPResponse) {
	var notes []string
	if len(text) > limit {
		text = cutUTF8(text, limit)
		notes = append(notes, "cut at "+strconv.Itoa(limit)+" bytes of text")
	}
	if resp.Truncated {
		notes = append(notes, "the response was longer than the host reads: it kept its first "+bodyBytes(resp)+"; this is its beginning")
	}
	b.WriteString(text)
	if len(notes) > 0 {
		b.WriteString("\n… (" + strings.Join(notes, "; ") + ")")
	}
}

// binaryNote describes a body the host did not pass on because it is not
// text: its type and size, never its bytes.
func binaryNote(resp *hostabi.HTTPResponse) string {
	size := bodyBytes(resp)
	if resp.Truncated {
		size = "more than " + size
	}
	s := "binary body: " + resp.Binary + ", " + size
	if enc := resp.Headers["Content-Encoding"]; enc != "" && resp.Decoded == "" {
		s += ", Content-Encoding " + enc + " not decoded"
	}
	return s + " (not shown)"
}

// bodyBytes says how many bytes of the body the host read ("1048576
// bytes", "2097152 bytes after gzip decoding").
func bodyBytes(resp *hostabi.HTTPResponse) string {
	n := resp.Size
	if n == 0 && resp.Binary == "" {
		n = int64(len(resp.Body)) // a host that does not report the size
	}
	s := strconv.FormatInt(n, 10) + " bytes"
	if resp.Decoded != "" {
		s += " after " + resp.Decoded + " decoding"
	}
	return s
}

func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// htmlText reduces an HTML document to the text a reader sees: block
// elements become lines, headings get #, list items -, links keep their
// target, and scripts, styles and other invisible parts go.
func htmlText(doc string) string {
	z := html.NewTokenizer(strings.NewReader(doc))
	var b strings.Builder
	skip := 0 // inside script, style, …
	var href string
	pendingSpace := false
	nl := func(n int) {
		s := b.String()
		have := len(s) - len(strings.TrimRight(s, "\n"))
		if b.Len() == 0 {
			return
		}
		for ; have < n; have++ {
			b.WriteByte('\n')
		}
		pendingSpace = false
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				return strings.TrimSpace(b.String())
			}
			return strings.TrimSpace(collapseBlank(b.String()))
		case html.TextToken:
			if skip > 0 {
				continue
			}
			raw := string(z.Text()) // Text may be called once per token
			words := strings.Fields(raw)
			if len(words) == 0 {
				pendingSpace = pendingSpace || b.Len() > 0
				continue
			}
			if pendingSpace || (len(raw) > 0 && isSpace(raw[0])) {
				if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") && !strings.HasSuffix(s, " ") {
					b.WriteByte(' ')
				}
			}
			b.WriteString(strings.Join(words, " "))
			pendingSpace = isSpace(raw[len(raw)-1])
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			end := tt == html.EndTagToken
			switch tag {
			case "script", "style", "noscript", "template", "svg", "head", "iframe", "object":
				if tt == html.StartTagToken {
					skip++
				} else if end && skip > 0 {
					skip--
				}
				continue
			}
			if skip > 0 {
				continue
			}
			switch tag {
			case "title":
			case "h1", "h2", "h3", "h4", "h5", "h6":
				nl(2)
				if !end {
					b.WriteString(strings.Repeat("#", int(tag[1]-'0')) + " ")
				}
			case "p", "div", "section", "article", "header", "footer", "main", "nav", "aside", "table", "blockquote", "pre", "form", "figure", "ul", "ol", "dl":
				nl(2)
			case "br", "tr", "dt", "dd", "hr":
				nl(1)
			case "li":
				nl(1)
				if !end {
					b.WriteString("- ")
				}
			case "td", "th":
				if !end && !strings.HasSuffix(b.String(), "\n") {
					b.WriteString(" | ")
				}
			case "img":
				for hasAttr {
					k, v, more := z.TagAttr()
					hasAttr = more
					if string(k) == "alt" && strings.TrimSpace(string(v)) != "" {
						b.WriteString("[image: " + strings.TrimSpace(string(v)) + "]")
					}
				}
			case "a":
				if !end {
					href = ""
					for hasAttr {
						k, v, more := z.TagAttr()
						hasAttr = more
						if string(k) == "href" {
							href = string(v)
						}
					}
				} else if href != "" && !strings.HasPrefix(href, "#") && !strings.HasPrefix(href, "javascript:") {
					b.WriteString(" (" + href + ")")
					href = ""
				}
			}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' }

// collapseBlank keeps at most one blank line in a row and trims lines.
func collapseBlank(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := 0
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
