// Package sentinels holds the repository's check of sentinel error messages:
// every package-level error variable built with errors.New, or with
// fmt.Errorf not starting with the wrapped sentinel's own text, carries a
// message prefixed with its package name ("nvme: segment full"), so a
// message in a log names where it came from. It has no code of its own; the
// rule and its exceptions are in sentinels_test.go.
package sentinels
