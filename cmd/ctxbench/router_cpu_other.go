//go:build !unix

package main

import "time"

// cpuTime is not measured on this platform; per-CPU-second rates then read +Inf.
func cpuTime() time.Duration { return 0 }
