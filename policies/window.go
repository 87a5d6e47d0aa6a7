package policies

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // maintenance-window time zones resolve without the host's zoneinfo

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Window is a RemediationPolicy maintenance window, parsed once by
// ParseWindow. It is the only reading of spec.safety.maintenanceWindows:
// Validate (the CLI) reports ParseWindow's errors, and the remediator
// decides from the Window it returns, so the two cannot disagree.
//
// The rules:
//   - days are Mon ... Sun; none means every day. A window belongs to the
//     day it opens on: Friday's 22:00-04:00 runs into Saturday morning;
//   - start is "HH:MM" on a 24-hour clock, end is too or "24:00" (the end
//     of the day); end is after start, unless crossesMidnight is set, and
//     then before it;
//   - timeZone is an IANA name such as Europe/Berlin. Empty means UTC, as
//     the API server defaults it. "Local" is refused: it would be the zone
//     of whichever machine happens to evaluate the policy;
//   - a window that falls in the hour skipped when daylight saving time
//     starts does not open that day.
type Window struct {
	// days holds the weekdays it opens on, by time.Weekday; all false: every
	// day.
	days            [7]bool
	start, end      int // minutes since midnight
	crossesMidnight bool
	loc             *time.Location
}

// weekdays are the API's day names in time.Weekday order.
var weekdays = [7]v1alpha1.Weekday{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// ParseWindow parses a maintenance window. Errors are relative to p, the
// window's path (spec.safety.maintenanceWindows[i]).
func ParseWindow(w v1alpha1.MaintenanceWindow, p *field.Path) (Window, field.ErrorList) {
	var errs field.ErrorList
	out := Window{crossesMidnight: w.CrossesMidnight}
	seen := map[v1alpha1.Weekday]bool{}
	for i, d := range w.Days {
		idx := -1
		for j, name := range weekdays {
			if d == name {
				idx = j
			}
		}
		switch {
		case idx < 0:
			errs = append(errs, field.NotSupported(p.Child("days").Index(i), string(d), []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}))
		case seen[d]:
			errs = append(errs, field.Duplicate(p.Child("days").Index(i), string(d)))
		default:
			out.days[idx] = true
		}
		seen[d] = true
	}
	start, okStart := clockMinutes(w.Start, false)
	if !okStart {
		errs = append(errs, field.Invalid(p.Child("start"), w.Start, `must be a time of day "HH:MM" on a 24-hour clock, e.g. "22:00"`))
	}
	end, okEnd := clockMinutes(w.End, true)
	if !okEnd {
		errs = append(errs, field.Invalid(p.Child("end"), w.End, `must be a time of day "HH:MM" on a 24-hour clock, e.g. "04:00" (or "24:00")`))
	}
	if okStart && okEnd {
		switch {
		case w.CrossesMidnight && end >= start:
			errs = append(errs, field.Invalid(p.Child("end"), w.End, fmt.Sprintf("crossesMidnight is set, so end must be before start %q (the window ends the next day)", w.Start)))
		case !w.CrossesMidnight && end <= start:
			errs = append(errs, field.Invalid(p.Child("end"), w.End, fmt.Sprintf("must be after start %q; a window that ends the next day sets crossesMidnight: true", w.Start)))
		}
	}
	out.start, out.end = start, end
	loc, err := Location(w.TimeZone)
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("timeZone"), w.TimeZone, "not an IANA time zone name such as UTC, Europe/Berlin or America/New_York"))
	}
	out.loc = loc
	return out, errs
}

// Location resolves a maintenance window's time zone: an IANA name, empty
// for UTC (the API server's default); "Local" is an error.
func Location(name string) (*time.Location, error) {
	switch {
	case name == "":
		return time.UTC, nil
	case strings.EqualFold(name, "local"):
		return nil, fmt.Errorf("time zone %q: the zone of the machine that evaluates the policy is not a maintenance window; name one, such as UTC", name)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	zones.Store(name, loc)
	return loc, nil
}

// zones caches the time zones Location loaded, by name. It is the one cache
// of this package, kept because the data cannot change while the process
// runs and time.LoadLocation reads and unpacks it on every call, while the
// remediator compiles every policy on every admission. Unknown names are not
// cached: they stay errors and cost a lookup each time.
var zones sync.Map // string -> *time.Location

// clockMinutes parses "HH:MM" strictly (two digits each) into minutes since
// midnight; "24:00" is accepted only as an end.
func clockMinutes(s string, end bool) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	for _, c := range s[:2] + s[3:] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	h, _ := strconv.Atoi(s[:2])
	m, _ := strconv.Atoi(s[3:])
	if end && h == 24 && m == 0 {
		return 24 * 60, true
	}
	if h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// Around returns the occurrence of w that contains now, if any: it opened
// on today's or yesterday's date in the window's time zone.
func (w Window) Around(now time.Time) (open, close time.Time, ok bool) {
	local := now.In(w.loc)
	for back := 0; back <= 1; back++ {
		day := time.Date(local.Year(), local.Month(), local.Day()-back, 0, 0, 0, 0, w.loc)
		if o, c, ok := w.occurrence(day); ok && !now.Before(o) && now.Before(c) {
			return o, c, true
		}
	}
	return time.Time{}, time.Time{}, false
}

// NextOpening is the first opening of w after now, within eight days; zero
// when there is none.
func (w Window) NextOpening(now time.Time) time.Time {
	local := now.In(w.loc)
	for ahead := 0; ahead <= 8; ahead++ {
		day := time.Date(local.Year(), local.Month(), local.Day()+ahead, 0, 0, 0, 0, w.loc)
		if o, _, ok := w.occurrence(day); ok && o.After(now) {
			return o
		}
	}
	return time.Time{}
}

// occurrence is w's opening and closing on the given local date, if the
// window opens on that weekday.
func (w Window) occurrence(day time.Time) (open, close time.Time, ok bool) {
	if w.days != [7]bool{} && !w.days[day.Weekday()] {
		return time.Time{}, time.Time{}, false
	}
	endDay := day.Day()
	if w.crossesMidnight {
		endDay++
	}
	open = time.Date(day.Year(), day.Month(), day.Day(), w.start/60, w.start%60, 0, 0, w.loc)
	close = time.Date(day.Year(), day.Month(), endDay, w.end/60, w.end%60, 0, 0, w.loc)
	if !close.After(open) {
		// The window lies in the hour skipped when daylight saving time
		// starts: it does not open that day.
		return time.Time{}, time.Time{}, false
	}
	return open, close, true
}
