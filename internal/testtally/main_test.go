package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stream builds `go test -json` lines.
func stream(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestTally(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		in                      string
		passed, failed, skipped int
		want                    []string // substrings of the report
		wantNot                 []string
	}{
		{
			name: "pass fail skip",
			in: stream(
				`{"Action":"run","Package":"p","Test":"TestA"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
				`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: fine\n"}`,
				`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}`,
				`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: wrong bytes\n"}`,
				`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0.2}`,
				`{"Action":"output","Package":"p","Test":"TestC","Output":"=== RUN   TestC\n"}`,
				`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:5: dependency missing: s3cmd\n"}`,
				`{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}`,
				`{"Action":"skip","Package":"p","Test":"TestC"}`,
				`{"Action":"fail","Package":"p","Elapsed":1.5}`,
			),
			passed: 1, failed: 1, skipped: 1,
			want:    []string{"--- FAIL p TestB", "wrong bytes", "FAIL p 1.5s", "p TestC: c_test.go:5: dependency missing: s3cmd", "1 passed, 1 failed, 1 skipped\n"},
			wantNot: []string{"fine"},
		},
		{
			name: "subtests count",
			in: stream(
				`{"Action":"pass","Package":"q","Test":"TestT/a"}`,
				`{"Action":"pass","Package":"q","Test":"TestT/b"}`,
				`{"Action":"pass","Package":"q","Test":"TestT"}`,
				`{"Action":"pass","Package":"q","Elapsed":0.3}`,
				`{"Action":"skip","Package":"r"}`,
			),
			passed: 3,
			want:   []string{"ok   q 0.3s", "3 passed, 0 failed, 0 skipped"},
		},
		{
			name: "package failure without a failed test",
			in: stream(
				`{"Action":"pass","Package":"q","Test":"TestT"}`,
				`{"Action":"output","Package":"q","Output":"panic: test timed out after 20m0s\n"}`,
				`{"Action":"fail","Package":"q","Elapsed":1200}`,
			),
			passed: 1, failed: 1,
			want: []string{"panic: test timed out", "q (package)", "1 passed, 1 failed, 0 skipped"},
		},
		{
			name: "build failure",
			in: stream(
				`{"ImportPath":"b [b.test]","Action":"build-output","Output":"b/x.go:3:1: syntax error\n"}`,
				`{"ImportPath":"b [b.test]","Action":"build-fail"}`,
				`{"Action":"start","Package":"b"}`,
				`{"Action":"output","Package":"b","Output":"FAIL\tb [build failed]\n"}`,
				`{"Action":"fail","Package":"b","Elapsed":0}`,
			),
			failed: 1,
			want:   []string{"BUILD FAIL b [b.test]", "syntax error", "b (package)", "0 passed, 1 failed, 0 skipped"},
		},
		{
			name:   "plain lines pass through",
			in:     stream(`go: downloading example.com/m v1.0.0`, `{"Action":"pass","Package":"q","Test":"TestT"}`),
			passed: 1,
			want:   []string{"go: downloading example.com/m v1.0.0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w, logw bytes.Buffer
			res, err := tally(strings.NewReader(tc.in), &w, &logw, nil)
			if err != nil {
				t.Fatal(err)
			}
			summary(&w, res)
			if res.passed != tc.passed || res.failed != tc.failed || res.skipped != tc.skipped {
				t.Errorf("tally %d/%d/%d, want %d/%d/%d", res.passed, res.failed, res.skipped, tc.passed, tc.failed, tc.skipped)
			}
			report := w.String()
			for _, s := range tc.want {
				if !strings.Contains(report, s) {
					t.Errorf("report lacks %q:\n%s", s, report)
				}
			}
			for _, s := range tc.wantNot {
				if strings.Contains(report, s) {
					t.Errorf("report has %q:\n%s", s, report)
				}
			}
			lines := strings.Split(strings.TrimRight(report, "\n"), "\n")
			if last := lines[len(lines)-1]; !regexp.MustCompile(`^\d+ passed, \d+ failed, \d+ skipped$`).MatchString(last) {
				t.Errorf("last line %q is not the tally", last)
			}
		})
	}
}

func TestShowPassed(t *testing.T) {
	in := stream(
		`{"Action":"output","Package":"p","Test":"TestPartition","Output":"    leader elected after 1.2s\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestPartition","Elapsed":9}`,
	)
	var w bytes.Buffer
	if _, err := tally(strings.NewReader(in), &w, nil, regexp.MustCompile("Partition")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.String(), "leader elected after 1.2s") {
		t.Fatalf("shown test's output missing:\n%s", w.String())
	}
}

// TestRealGoTest runs `go test -json` on a small package (testdata/sample:
// one passing, one failing, one skipping test) and the command on its
// output, as make test does.
func TestRealGoTest(t *testing.T) {
	gotest := exec.Command("go", "test", "-json", "-count=1", ".")
	gotest.Dir = filepath.Join("testdata", "sample")
	gotest.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	js, _ := gotest.Output() // exits 1: a test fails on purpose
	if len(js) == 0 {
		t.Fatal("go test -json printed nothing")
	}
	var w bytes.Buffer
	res, err := tally(bytes.NewReader(js), &w, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	summary(&w, res)
	if res.passed != 1 || res.failed != 1 || res.skipped != 1 {
		t.Fatalf("tally %d/%d/%d, want 1/1/1:\n%s", res.passed, res.failed, res.skipped, w.String())
	}
	for _, s := range []string{"--- FAIL sample TestFails", "deliberate failure", "sample TestSkips: sample_test.go", "not here on purpose"} {
		if !strings.Contains(w.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, w.String())
		}
	}
}
