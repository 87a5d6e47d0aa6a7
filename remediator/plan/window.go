package plan

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// InWindow reports whether now is inside one of the windows, and when that
// next changes: the closing time when inside, the next opening when outside.
// No windows means any time (in is true, next is zero). An error names the
// window with a bad time or time zone; the caller must then treat the
// windows as closed.
func InWindow(ws []v1alpha1.MaintenanceWindow, now time.Time) (in bool, next time.Time, err error) {
	if len(ws) == 0 {
		return true, time.Time{}, nil
	}
	for i, w := range ws {
		open, close, err := windowAround(w, now)
		if err != nil {
			return false, time.Time{}, fmt.Errorf("maintenanceWindows[%d]: %w", i, err)
		}
		if !open.IsZero() && !now.Before(open) && now.Before(close) {
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
		if nextOpen, err := nextOpening(w, now); err != nil {
			return false, time.Time{}, fmt.Errorf("maintenanceWindows[%d]: %w", i, err)
		} else if !nextOpen.IsZero() && (next.IsZero() || nextOpen.Before(next)) {
			next = nextOpen
		}
	}
	return in, next, nil
}

// windowAround returns the occurrence of w that contains now, if any: it
// started on today's or yesterday's date in the window's time zone.
func windowAround(w v1alpha1.MaintenanceWindow, now time.Time) (open, close time.Time, err error) {
	loc, err := location(w.TimeZone)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	local := now.In(loc)
	for back := 0; back <= 1; back++ {
		day := time.Date(local.Year(), local.Month(), local.Day()-back, 0, 0, 0, 0, loc)
		o, c, ok, err := occurrence(w, day)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		if ok && !now.Before(o) && now.Before(c) {
			return o, c, nil
		}
	}
	return time.Time{}, time.Time{}, nil
}

// nextOpening is the first opening of w after now, within eight days.
func nextOpening(w v1alpha1.MaintenanceWindow, now time.Time) (time.Time, error) {
	loc, err := location(w.TimeZone)
	if err != nil {
		return time.Time{}, err
	}
	local := now.In(loc)
	for ahead := 0; ahead <= 8; ahead++ {
		day := time.Date(local.Year(), local.Month(), local.Day()+ahead, 0, 0, 0, 0, loc)
		o, _, ok, err := occurrence(w, day)
		if err != nil {
			return time.Time{}, err
		}
		if ok && o.After(now) {
			return o, nil
		}
	}
	return time.Time{}, nil
}

// occurrence is w's opening and closing on the given local date, if the
// window opens on that weekday.
func occurrence(w v1alpha1.MaintenanceWindow, day time.Time) (open, close time.Time, ok bool, err error) {
	if len(w.Days) > 0 {
		wd := v1alpha1.Weekday(day.Weekday().String()[:3])
		found := false
		for _, d := range w.Days {
			if d == wd {
				found = true
				break
			}
		}
		if !found {
			return time.Time{}, time.Time{}, false, nil
		}
	}
	sh, sm, err := clock(w.Start)
	if err != nil {
		return time.Time{}, time.Time{}, false, fmt.Errorf("start: %w", err)
	}
	eh, em, err := clock(w.End)
	if err != nil {
		return time.Time{}, time.Time{}, false, fmt.Errorf("end: %w", err)
	}
	if !w.CrossesMidnight && eh*60+em <= sh*60+sm {
		return time.Time{}, time.Time{}, false, fmt.Errorf("end %s is not after start %s", w.End, w.Start)
	}
	endDay := day.Day()
	if w.CrossesMidnight {
		endDay++
	}
	open = time.Date(day.Year(), day.Month(), day.Day(), sh, sm, 0, 0, day.Location())
	close = time.Date(day.Year(), day.Month(), endDay, eh, em, 0, 0, day.Location())
	if !close.After(open) {
		// The window lies in the hour skipped when daylight saving time
		// starts: it does not open that day.
		return time.Time{}, time.Time{}, false, nil
	}
	return open, close, true, nil
}

// clock parses "HH:MM"; "24:00" is the end of the day.
func clock(s string) (h, m int, err error) {
	hs, ms, ok := strings.Cut(s, ":")
	if !ok || len(hs) != 2 || len(ms) != 2 {
		return 0, 0, fmt.Errorf("%q is not HH:MM", s)
	}
	h, err1 := strconv.Atoi(hs)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || h < 0 || h > 24 || m < 0 || m > 59 || (h == 24 && m != 0) {
		return 0, 0, fmt.Errorf("%q is not HH:MM", s)
	}
	return h, m, nil
}

var locations sync.Map // time zone name -> *time.Location

// location loads a time zone once; empty is UTC.
func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	locations.Store(name, l)
	return l, nil
}
