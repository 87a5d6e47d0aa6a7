package demo

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultSpeed is how much faster than real time the demo runs: every
// duration in the example policies, the shipped alert rules and
// Alertmanager's routing is divided by it, so that "for: 2m" holds for 2 s
// and a 5 m healthyFor takes 5 s. What the demo shows is the same sequence of
// decisions the defaults give, 60 times faster.
const DefaultSpeed = 60

// durationRE matches the durations the policies (Go's time.ParseDuration)
// and Prometheus/Alertmanager (its model.Duration) both read: one or more
// number-unit pairs. "0", "5%", "22:00" and "1d" do not match.
var durationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// scaleDuration divides a duration string by speed, rounding to whole
// milliseconds and keeping at least 1 ms. It returns s unchanged when it is
// not a duration.
func scaleDuration(s string, speed int) string {
	if speed <= 1 || !durationRE.MatchString(s) {
		return s
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return s
	}
	scaled := (d / time.Duration(speed)).Round(time.Millisecond)
	if scaled < time.Millisecond {
		scaled = time.Millisecond
	}
	return formatDuration(scaled)
}

// formatDuration writes d in a form both Go and Prometheus read: whole
// seconds as "4s", otherwise milliseconds ("500ms"). Prometheus refuses
// Go's "1m0.5s".
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// scaleTree divides every duration string in a decoded YAML or JSON tree
// by speed, in place, except under the keys in skip.
func scaleTree(v any, speed int, skip map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if skip[k] {
				continue
			}
			t[k] = scaleTree(child, speed, skip)
		}
	case []any:
		for i := range t {
			t[i] = scaleTree(t[i], speed, skip)
		}
	case string:
		return scaleDuration(t, speed)
	}
	return v
}

// policyOnlyKeys are not scaled: names, labels, free text and resource
// quantities ("50m" is 50 millicores) are not durations even when they
// look like one, and a few durations stay at real time.
var policyOnlyKeys = map[string]bool{"metadata": true, "description": true, "name": true, "reason": true, "operation": true,
	"resources": true, "image": true, "command": true, "args": true, "env": true, "parameters": true,
	// Durations left at real time. A reclaim policy's maxSnooze caps the
	// janitor's Keep buttons, which keep for 4 h and 24 h of real time:
	// 24h sped up to 24 min would leave one "Keep 24 min" button instead
	// of the "Keep 4 h" that the idle story presses (decide.KeepButtons).
	"maxSnooze": true}

// speedUp returns a copy of a kubemedic object with its durations divided
// by speed and its maintenance windows removed (so that a scenario's
// non-urgent steps run now instead of tonight). It reports whether it
// removed windows.
func speedUp(obj client.Object, speed int) (client.Object, bool, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, false, err
	}
	var tree map[string]any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, false, err
	}
	scaleTree(tree, speed, policyOnlyKeys)
	removed := false
	if spec, ok := tree["spec"].(map[string]any); ok {
		if safety, ok := spec["safety"].(map[string]any); ok {
			if _, ok := safety["maintenanceWindows"]; ok {
				delete(safety, "maintenanceWindows")
				removed = true
			}
		}
	}
	b, err = json.Marshal(tree)
	if err != nil {
		return nil, false, err
	}
	// A new object of the same type: decoding into a copy of obj would
	// merge slices instead of replacing them.
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, false, err
	}
	return out, removed, nil
}
