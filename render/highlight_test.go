package render_test

import (
	"strings"
	"testing"
)

// Code is coloured by language, a comment or string over several lines
// all through, and an unknown language is left as written.
func TestCodeColours(t *testing.T) {
	const (
		dim, green, magenta, blue, cyan, red, reset = "\x1b[2m", "\x1b[32m", "\x1b[35m", "\x1b[34m", "\x1b[36m", "\x1b[31m", "\x1b[0m"
	)
	cases := []struct {
		name, in string
		has      []string
	}{
		{"go", "```go\nfunc main() { return 42 } // done\n```\n",
			[]string{magenta + "func" + reset, blue + "main" + reset, magenta + "return" + reset, cyan + "42" + reset, dim + "// done" + reset}},
		{"block comment over lines", "```c\nint x; /* one\ntwo */ int y;\n```\n",
			[]string{dim + "/* one" + reset, dim + "two */" + reset, magenta + "int" + reset + " y;"}},
		{"python triple quotes", "```py\ns = \"\"\"a\nb\"\"\" if x else y\n```\n",
			[]string{green + "\"\"\"a" + reset, green + "b\"\"\"" + reset, magenta + "if" + reset}},
		{"string escapes", "```js\nlet s = \"a \\\" b\" + 'c'\n```\n",
			[]string{green + "\"a \\\" b\"" + reset, green + "'c'" + reset}},
		{"shell", "```bash\nif true; then echo hi # note\n```\n",
			[]string{magenta + "if" + reset, dim + "# note" + reset}},
		{"diff", "```diff\n-old\n+new\n@@ -1 +1 @@\n```\n",
			[]string{red + "-old" + reset, green + "+new" + reset, cyan + "@@ -1 +1 @@" + reset}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := markdown(c.in, true)
			for _, h := range c.has {
				if !strings.Contains(got, h) {
					t.Errorf("%q lacks %q", got, h)
				}
			}
		})
	}
	if got := markdown("```brainfuck\nfunc \"x\"\n```\n", true); !strings.Contains(got, "\nfunc \"x\"\n") {
		t.Errorf("unknown language coloured: %q", got)
	}
}
