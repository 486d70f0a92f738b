package main

import (
	"fmt"
	"path/filepath"
	"testing"
)

// A session's creator records the pipeline and script paths; a worker with
// --pipelines DIR looks them up by name in DIR. A recorded name that is
// "..", "." or "/" must not lead to DIR's parent or to DIR itself: it is
// refused with one line naming it.
func TestInDirStaysInFolder(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"..", "/x/..", "x/../..", ".", "/", "/x/."} {
		for _, in := range []settings{{Pipeline: p}, {Script: p}} {
			_, err := in.inDir(dir)
			want := fmt.Sprintf("the session's pipeline %q names no file to look up in --pipelines %s", p, dir)
			if in.Script != "" {
				want = fmt.Sprintf("the session's script %q names no file to look up in --pipelines %s", p, dir)
			}
			if err == nil || err.Error() != want {
				t.Errorf("inDir(%+v): %v, want %s", in, err, want)
			}
		}
	}
	s, err := settings{Pipeline: "/elsewhere/agent.yaml", Script: "../s.json"}.inDir(dir)
	if err != nil || s.Pipeline != filepath.Join(dir, "agent.yaml") || s.Script != filepath.Join(dir, "s.json") {
		t.Errorf("inDir: %+v, %v", s, err)
	}
}
