package native_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// TestProtocolDocErrorTable checks that docs/protocol.md lists every wire
// code of gateway/errcode, by number and name, and nothing else.
func TestProtocolDocErrorTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tail, ok := strings.Cut(string(b), "## Error codes")
	if !ok {
		t.Fatal("docs/protocol.md has no error-code section")
	}
	section, _, _ := strings.Cut(tail, "\n## ")
	rows := regexp.MustCompile(`(?m)^\| (\d+) \| (\w+) \|`).FindAllStringSubmatch(section, -1)
	seen := map[int]bool{}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		if got := errcode.Code(n).String(); got != r[2] {
			t.Errorf("doc lists code %d as %s, errcode says %s", n, r[2], got)
		}
		seen[n] = true
	}
	for n := 0; ; n++ {
		c := errcode.Code(n)
		if c.String() == "Code("+strconv.Itoa(n)+")" {
			break // past the last defined code
		}
		if !seen[n] {
			t.Errorf("code %d (%s) missing from docs/protocol.md", n, c)
		}
	}
}
