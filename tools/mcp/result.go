package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResultText turns a tool result into the text the model reads: text
// content verbatim; structured content as JSON text (unless a text part
// already carries the same JSON, or it only wraps the text); images and audio as a short placeholder
// naming the type and size; resource links as their URI; embedded
// resources as their text, or a placeholder for a blob. Parts are joined
// by newlines. Text over max bytes is cut with a note saying how much was
// cut.
func ResultText(r *sdk.CallToolResult, max int) string {
	var parts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %s]", orUnknown(c.MIMEType), size(len(c.Data))))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %s]", orUnknown(c.MIMEType), size(len(c.Data))))
		case *sdk.ResourceLink:
			parts = append(parts, c.URI)
		case *sdk.EmbeddedResource:
			switch rc := c.Resource; {
			case rc == nil:
			case rc.Text != "" || len(rc.Blob) == 0:
				parts = append(parts, rc.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %s]", rc.URI, orUnknown(rc.MIMEType), size(len(rc.Blob))))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil && !sameJSON(parts, b) && !wrapsText(b, parts) {
			parts = append(parts, string(b))
		}
	}
	return Cut(strings.Join(parts, "\n"), max)
}

func orUnknown(mime string) string {
	if mime == "" {
		return "of unknown type"
	}
	return mime
}

func size(n int) string {
	if n < 10<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// sameJSON reports whether some text part is JSON equal to b (servers
// usually send structured content twice, once as text for old clients).
func sameJSON(parts []string, b []byte) bool {
	var want any
	if json.Unmarshal(b, &want) != nil {
		return false
	}
	wb, _ := json.Marshal(want)
	for _, p := range parts {
		var got any
		if json.Unmarshal([]byte(p), &got) != nil {
			continue
		}
		if gb, _ := json.Marshal(got); bytes.Equal(gb, wb) {
			return true
		}
	}
	return false
}

// wrapsText reports whether structured content is only the text again,
// wrapped in an object of one string field ({"content": TEXT}, as the
// filesystem server sends it).
func wrapsText(b []byte, parts []string) bool {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || len(m) != 1 {
		return false
	}
	for _, v := range m {
		s, ok := v.(string)
		return ok && s == strings.Join(parts, "\n")
	}
	return false
}

// Cut returns s if it has at most max bytes; otherwise its first bytes
// (on a rune boundary) and a note saying how much was cut, within max.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf("\n… [cut: %d of %d bytes not shown; ask for less, such as a smaller range]", len(s), len(s))
	keep := max - len(note)
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + fmt.Sprintf("\n… [cut: %d of %d bytes not shown; ask for less, such as a smaller range]", len(s)-keep, len(s))
}
