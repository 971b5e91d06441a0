// Command testtally reads the event stream of `go test -json` on stdin and
// prints a readable account of the run: one line per package, the full
// output of every failed test (and of passed tests whose name matches
// -show), the skipped tests with their reasons, and last a tally line
//
//	N passed, N failed, N skipped
//
// which CI parses. It exits 1 when any test or package failed (a build
// error, a panic in TestMain and a timeout count as failures of the
// package), so `go test -json ./... | testtally` can replace `go test`.
// -log FILE also writes every test's output, in order, to FILE.
//
// Every test counts, subtests included, as `go test -v` lists them.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
	Elapsed    float64
}

// result is the outcome of a run.
type result struct {
	passed, failed, skipped int
	// failures and skips name "package Test/sub"; skips carry their reason.
	failures []string
	skips    []skip
}

type skip struct{ name, reason string }

// tally consumes events from r, writing the report to w and every output
// line to logw (when not nil).
func tally(r io.Reader, w, logw io.Writer, show *regexp.Regexp) (result, error) {
	var res result
	out := map[string][]string{}   // "pkg\x00test" -> output lines
	build := map[string][]string{} // import path -> build output
	pkgFailedTests := map[string]int{}
	key := func(e event) string { return e.Package + "\x00" + e.Test }
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// go test prints some lines (a vet failure, `go: downloading`)
			// outside the JSON stream: pass them on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		switch e.Action {
		case "build-output":
			build[e.ImportPath] = append(build[e.ImportPath], e.Output)
		case "build-fail":
			fmt.Fprintf(w, "BUILD FAIL %s\n%s", e.ImportPath, strings.Join(build[e.ImportPath], ""))
		case "output":
			out[key(e)] = append(out[key(e)], e.Output)
			if logw != nil {
				fmt.Fprint(logw, e.Output)
			}
		case "pass", "fail", "skip":
			lines := out[key(e)]
			delete(out, key(e))
			if e.Test == "" {
				res.packageDone(w, e, lines, pkgFailedTests[e.Package])
				continue
			}
			name := e.Package + " " + e.Test
			switch e.Action {
			case "pass":
				res.passed++
				if show != nil && show.MatchString(e.Test) {
					fmt.Fprintf(w, "--- PASS %s (%.2fs)\n%s", name, e.Elapsed, strings.Join(lines, ""))
				}
			case "fail":
				res.failed++
				pkgFailedTests[e.Package]++
				res.failures = append(res.failures, name)
				fmt.Fprintf(w, "--- FAIL %s (%.2fs)\n%s", name, e.Elapsed, strings.Join(lines, ""))
			case "skip":
				res.skipped++
				res.skips = append(res.skips, skip{name, skipReason(lines)})
			}
		}
	}
	return res, sc.Err()
}

// packageDone reports a package's end; a failed package none of whose tests
// failed (build error, panic outside a test, timeout) counts as one failure.
func (res *result) packageDone(w io.Writer, e event, lines []string, failedTests int) {
	switch e.Action {
	case "pass":
		fmt.Fprintf(w, "ok   %s %.1fs\n", e.Package, e.Elapsed)
	case "skip":
		// no test files
	case "fail":
		fmt.Fprintf(w, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
		if failedTests == 0 {
			res.failed++
			res.failures = append(res.failures, e.Package+" (package)")
			fmt.Fprint(w, strings.Join(lines, ""))
		}
	}
}

// skipReason is the message a test skipped with: the output lines between
// "=== RUN" and "--- SKIP", trimmed.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		msg = append(msg, t)
	}
	return strings.Join(msg, " ")
}

// summary prints the failures, the skips and the tally line.
func summary(w io.Writer, res result) {
	if len(res.failures) > 0 {
		fmt.Fprintln(w, "failed:")
		for _, f := range res.failures {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	if len(res.skips) > 0 {
		sort.Slice(res.skips, func(i, j int) bool { return res.skips[i].name < res.skips[j].name })
		fmt.Fprintln(w, "skipped:")
		for _, s := range res.skips {
			fmt.Fprintf(w, "  %s: %s\n", s.name, s.reason)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", res.passed, res.failed, res.skipped)
}

func main() {
	logPath := flag.String("log", "", "also write every test's output to this file")
	showRe := flag.String("show", "", "print the output of passed tests whose name matches this regexp")
	flag.Parse()
	var show *regexp.Regexp
	if *showRe != "" {
		var err error
		if show, err = regexp.Compile(*showRe); err != nil {
			fmt.Fprintln(os.Stderr, "testtally: -show:", err)
			os.Exit(2)
		}
	}
	var logw io.Writer
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtally:", err)
			os.Exit(2)
		}
		defer f.Close()
		logw = f
	}
	res, err := tally(os.Stdin, os.Stdout, logw, show)
	summary(os.Stdout, res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtally: reading go test -json:", err)
		os.Exit(2)
	}
	if res.failed > 0 {
		os.Exit(1)
	}
}
