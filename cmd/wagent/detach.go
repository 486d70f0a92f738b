package main

import (
	"context"
	"fmt"
	"path/filepath"
)

// detached queues a detached run's prompt (or wakes the session), prints
// the session id and returns.
func detached(ctx context.Context, env *cliEnv, cn *conn, asJSON bool, id string, isNew bool, prompt string) error {
	var msgID string
	switch {
	case prompt != "":
		q, err := cn.client.Input(ctx, id, "send", prompt)
		if err != nil {
			return apiFail(err)
		}
		msgID = q.MessageID
	case !isNew:
		if _, err := cn.client.Resume(ctx, id); err != nil {
			return apiFail(err)
		}
	}
	if asJSON {
		printJSON(env.stdout, map[string]any{"session": id, "created": isNew, "message_id": msgID})
	} else {
		tprintln(env.stdout, id)
	}
	switch {
	case cn.remote:
		tprintf(env.stderr, "wagent: queued for the workers; follow it with: wagent log -f %s\n", id)
	case cn.own != nil:
		tprintf(env.stderr, "wagent: queued; no process runs this store now: wagent resume %s runs it (or wagent serve)\n", id)
	}
	return nil
}

// inDir returns the settings with their pipeline and script looked up by
// file name in dir: a worker with --pipelines DIR runs what its folder
// holds, whatever path the session's creator recorded. A recorded path
// whose last element is no file name (.., ., /) is refused: joined to dir
// it would name dir or its parent.
func (s settings) inDir(dir string) (settings, error) {
	for _, f := range []struct {
		what string
		p    *string
	}{{"pipeline", &s.Pipeline}, {"script", &s.Script}} {
		if *f.p == "" {
			continue
		}
		base := filepath.Base(*f.p)
		if base == "." || base == ".." || base == string(filepath.Separator) {
			return s, fmt.Errorf("the session's %s %q names no file to look up in --pipelines %s", f.what, *f.p, dir)
		}
		*f.p = filepath.Join(dir, base)
	}
	return s, nil
}
