package subcmd

import "strings"

// SplitList splits a comma-separated flag value into its items, each trimmed
// of spaces, dropping empty ones: "a, ,b," is [a b], and "" is nil.
func SplitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
