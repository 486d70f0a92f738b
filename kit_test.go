package wagent_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent"
)

// TestGuestKitIsTheSource defends what wagent ops new promises: the kit
// the binary carries is exactly the source of hostabi and guests/pdk
// (every non-test .go file, and ABI.md), so an op built outside the
// repository compiles against the same ABI as the host.
func TestGuestKitIsTheSource(t *testing.T) {
	kit := wagent.GuestKit()
	var want []string
	for _, dir := range []string{"hostabi", "guests/pdk"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || strings.HasSuffix(n, "_test.go") || !(strings.HasSuffix(n, ".go") || n == "ABI.md") {
				continue
			}
			want = append(want, dir+"/"+n)
			disk, _ := os.ReadFile(filepath.FromSlash(dir + "/" + n))
			got, err := fs.ReadFile(kit, dir+"/"+n)
			if err != nil || !bytes.Equal(got, disk) {
				t.Errorf("the kit's %s/%s differs from the source (%v)", dir, n, err)
			}
		}
	}
	var got []string
	fs.WalkDir(kit, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, p)
		}
		return err
	})
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kit files mismatch (-source +kit):\n%s", diff)
	}
	if _, err := fs.ReadFile(kit, "guests/pdk/tool_test.go"); err == nil {
		t.Error("the kit serves a test file")
	}
	if err := fstest.TestFS(kit, want...); err != nil {
		t.Error(err)
	}
}
