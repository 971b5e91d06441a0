package validation

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOperationsAlerts: every PromQL block of docs/operations.md parses
// lexically and queries only metrics ctxd exports.
func TestOperationsAlerts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 5 {
		t.Fatalf("%d promql blocks in docs/operations.md, want the alerts", len(blocks))
	}
	for _, blk := range blocks {
		var expr []string
		for _, l := range strings.Split(blk[1], "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				expr = append(expr, l)
			}
		}
		q := strings.Join(expr, " ")
		names, err := MetricNames(q)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("alert selects no metric: %s", q)
		}
		for _, n := range names {
			if !KnownSeries(n) {
				t.Errorf("alert uses unknown metric %s: %s", n, q)
			}
		}
	}
}
