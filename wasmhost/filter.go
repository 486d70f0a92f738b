package wasmhost

import "context"

// Document names a JSON document a guest reads through the host imports.
type Document int

const (
	// DocView is the call's view (the view import).
	DocView Document = iota
	// DocMessage is one conversation message (the message import).
	DocMessage
)

// DocumentFilter rewrites a document before the guest reads it. It gets
// the document as the host encoded it and returns what the guest reads
// instead; it must not keep or modify doc, and the host may reuse the
// slice it returns.
type DocumentFilter func(kind Document, doc []byte) []byte

type filterKey struct{}

// WithDocumentFilter returns a context under which Op.Handle hands the
// guest the view and messages as f rewrites them. It exists for
// conformance kits (wasmhost/abitest), which add the keys a later ABI
// minor may add to check that a guest skips keys it does not know. The
// host still checks the effects against the view it was given, not the
// rewritten one, so f cannot make an invalid answer pass.
func WithDocumentFilter(ctx context.Context, f DocumentFilter) context.Context {
	return context.WithValue(ctx, filterKey{}, f)
}

func documentFilter(ctx context.Context) DocumentFilter {
	f, _ := ctx.Value(filterKey{}).(DocumentFilter)
	return f
}
