package plan

import (
	"time"

	"github.com/kubemedic/kubemedic/policies"
)

// InWindow reports whether now is inside one of the windows, and when that
// next changes: the closing time when inside, the next opening when outside.
// No windows means any time (in is true, next is zero). The windows are
// parsed once by policies.ParseWindow, in Compile.
func InWindow(ws []policies.Window, now time.Time) (in bool, next time.Time) {
	if len(ws) == 0 {
		return true, time.Time{}
	}
	for _, w := range ws {
		if _, close, ok := w.Around(now); ok {
			// Inside: the state changes when the last overlapping window closes.
			if !in || close.After(next) {
				next = close
			}
			in = true
			continue
		}
		if in {
			continue
		}
		if nextOpen := w.NextOpening(now); !nextOpen.IsZero() && (next.IsZero() || nextOpen.Before(next)) {
			next = nextOpen
		}
	}
	return in, next
}
