package validation

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// ErrPromQL is a query the lexical check refuses.
var ErrPromQL = errors.New("validation: promql")

// promqlFuncs are PromQL's functions and aggregation operators, plus
// Grafana's label_values for template variables.
var promqlFuncs = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`abs absent absent_over_time avg_over_time ceil changes clamp clamp_max
		clamp_min count_over_time day_of_month day_of_week day_of_year days_in_month delta deriv exp floor
		histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
		histogram_sum holt_winters double_exponential_smoothing hour idelta increase irate label_join
		label_replace last_over_time ln log2 log10 mad_over_time max_over_time min_over_time minute month
		predict_linear present_over_time quantile_over_time rate resets round scalar sgn sort sort_desc
		sort_by_label sort_by_label_desc sqrt stddev_over_time stdvar_over_time sum_over_time time timestamp
		vector year sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk
		limit_ratio label_values`) {
		promqlFuncs[f] = true
	}
}

// promqlKeywords are words that are neither metrics nor functions.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
	"Inf": true, "NaN": true,
}

// labelListAfter are keywords followed by a parenthesised label list.
var labelListAfter = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names a PromQL expression selects, found
// lexically: string literals, label matchers ({...}), ranges ([...]),
// grouping label lists and Grafana variables ($var, ${var}) are skipped;
// an identifier followed by "(" must be a known function; every other
// identifier is a metric name. It also checks that brackets balance. It is
// no full parser, but it catches a misspelt or unknown metric or function.
func MetricNames(expr string) ([]string, error) {
	rs := []rune(expr)
	names := map[string]bool{}
	var stack []rune
	closer := map[rune]rune{')': '(', '}': '{', ']': '['}
	skipLabelList := false
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == '"' || r == '\'' || r == '`':
			j := i + 1
			for j < len(rs) && rs[j] != r {
				if rs[j] == '\\' && r != '`' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("%w: unterminated string in %q", ErrPromQL, expr)
			}
			i = j + 1
		case r == '$':
			// Grafana variable: $name, ${name...} or $__interval.
			j := i + 1
			if j < len(rs) && rs[j] == '{' {
				for j < len(rs) && rs[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(rs) && isIdent(rs[j]) {
					j++
				}
			}
			i = j
		case r == '{' || r == '[':
			// Label matchers and ranges: skip to the matching close,
			// stepping over strings.
			open, want := r, map[rune]rune{'{': '}', '[': ']'}[r]
			j := i + 1
			for j < len(rs) && rs[j] != want {
				if rs[j] == '"' || rs[j] == '\'' {
					q := rs[j]
					j++
					for j < len(rs) && rs[j] != q {
						if rs[j] == '\\' {
							j++
						}
						j++
					}
					if j >= len(rs) {
						break
					}
				}
				if rs[j] == open {
					return nil, fmt.Errorf("%w: nested %c in %q", ErrPromQL, open, expr)
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("%w: unclosed %c in %q", ErrPromQL, open, expr)
			}
			i = j + 1
		case r == '(':
			if skipLabelList {
				j := i + 1
				for j < len(rs) && rs[j] != ')' {
					j++
				}
				if j >= len(rs) {
					return nil, fmt.Errorf("%w: unclosed label list in %q", ErrPromQL, expr)
				}
				skipLabelList = false
				i = j + 1
				continue
			}
			stack = append(stack, r)
			i++
		case r == ')' || r == '}' || r == ']':
			if len(stack) == 0 || stack[len(stack)-1] != closer[r] {
				return nil, fmt.Errorf("%w: unbalanced %c in %q", ErrPromQL, r, expr)
			}
			stack = stack[:len(stack)-1]
			i++
		case unicode.IsDigit(r) || r == '.':
			j := i
			for j < len(rs) && (isIdent(rs[j]) || rs[j] == '.') {
				j++
			}
			i = j
		case isIdentStart(r):
			j := i
			for j < len(rs) && (isIdent(rs[j]) || rs[j] == ':') {
				j++
			}
			word := string(rs[i:j])
			k := j
			for k < len(rs) && unicode.IsSpace(rs[k]) {
				k++
			}
			nextParen := k < len(rs) && rs[k] == '('
			if !nextParen && promqlFuncs[word] {
				// An aggregation with its grouping first: sum by (x) (...).
				e := k
				for e < len(rs) && isIdent(rs[e]) {
					e++
				}
				if w := string(rs[k:e]); w == "by" || w == "without" {
					nextParen = true
				}
			}
			switch {
			case labelListAfter[word]:
				skipLabelList = nextParen
			case promqlKeywords[word]:
			case nextParen:
				if !promqlFuncs[word] {
					return nil, fmt.Errorf("%w: unknown function %s in %q", ErrPromQL, word, expr)
				}
			default:
				names[word] = true
			}
			i = j
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("%w: unclosed ( in %q", ErrPromQL, expr)
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func isIdentStart(r rune) bool { return r == '_' || r == ':' || unicode.IsLetter(r) }
func isIdent(r rune) bool      { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
