package render

import (
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// GFM's ~~strikethrough~~ for the inline parser, through goldmark's
// delimiter interface. goldmark's own (in its extension package) is not
// linked: that package brings every extension and the HTML renderer, and
// their init costs each wagent command some 3 ms at start.

var kindStrike = ast.NewNodeKind("Strike")

// strike is struck-through text.
type strike struct{ ast.BaseInline }

func (n *strike) Kind() ast.NodeKind { return kindStrike }

func (n *strike) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }

type strikeDelims struct{}

func (strikeDelims) IsDelimiter(b byte) bool { return b == '~' }

func (strikeDelims) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}

func (strikeDelims) OnMatch(int) ast.Node { return &strike{} }

type strikeParser struct{}

func (strikeParser) Trigger() []byte { return []byte{'~'} }

func (strikeParser) Parse(_ ast.Node, block text.Reader, pc parser.Context) ast.Node {
	before := block.PrecendingCharacter()
	if before == '~' {
		return nil // the rest of a run already taken as text
	}
	line, seg := block.PeekLine()
	d := parser.ScanDelimiter(line, before, 1, strikeDelims{})
	// Two tildes, as GFM asks (one or three are text).
	if d == nil || d.OriginalLength != 2 {
		return nil
	}
	d.Segment = seg.WithStop(seg.Start + d.OriginalLength)
	block.Advance(d.OriginalLength)
	pc.PushDelimiter(d)
	return d
}
