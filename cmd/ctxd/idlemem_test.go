package main

import "testing"

func TestIdleWatch(t *testing.T) {
	type look struct {
		acquired uint64
		inUse    int64
		want     bool
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"never used", []look{{0, 0, false}, {0, 0, false}, {0, 0, false}}},
		{"burst then quiet releases once", []look{{0, 0, false}, {100, 0, false}, {100, 0, true}, {100, 0, false}, {100, 0, false}}},
		{"steady load never releases", []look{{100, 0, false}, {200, 0, false}, {300, 10, false}, {400, 0, false}, {500, 0, false}}},
		{"in use without new acquisitions waits", []look{{100, 10, false}, {100, 10, false}, {100, 0, true}}},
		{"second burst releases again", []look{{100, 0, false}, {100, 0, true}, {150, 0, false}, {150, 0, true}, {150, 0, false}}},
		{"a look with zero in use during a load is not idle", []look{{100, 0, false}, {100, 0, true}, {130, 0, false}, {160, 0, false}, {190, 0, false}, {190, 0, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w idleWatch
			for i, l := range tt.looks {
				if got := w.due(l.acquired, l.inUse); got != l.want {
					t.Fatalf("look %d (acquired %d, in use %d): due = %v, want %v", i, l.acquired, l.inUse, got, l.want)
				}
			}
		})
	}
}
