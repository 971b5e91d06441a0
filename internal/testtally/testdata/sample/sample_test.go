// Package sample is TestRealGoTest's input: one test of each outcome.
package sample

import "testing"

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) { t.Error("deliberate failure") }

func TestSkips(t *testing.T) { t.Skip("not here on purpose") }
