package pipeline

import (
	"strings"
	"testing"
)

// A file with nothing in it (or only comments) says so and what to write,
// not yaml's bare "EOF".
func TestEmptyFile(t *testing.T) {
	for _, data := range []string{"", "\n\n", "# ops come later\n"} {
		_, err := Parse([]byte(data), "p.yaml", ".")
		if err == nil || !strings.Contains(err.Error(), "pipeline p.yaml: the file is empty; list the ops under a top-level ops: key") {
			t.Errorf("Parse(%q) = %v", data, err)
		}
	}
}
