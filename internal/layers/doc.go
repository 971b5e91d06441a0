// Package layers holds the repository's layering test: it reads the import
// graph (`go list -deps -json`) and fails on an import that breaks the
// layers described in docs/ARCHITECTURE.md, "Packages and dependencies".
// It has no code of its own; the rules and the known exceptions are in
// layers_test.go.
package layers
