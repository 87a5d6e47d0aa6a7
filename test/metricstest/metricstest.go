// Package metricstest reads metric values from a Prometheus registry in
// tests. Only tests import it.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value sums the samples of the named metric whose labels include every
// pair of labels (nil matches all): a counter's or gauge's value, a
// histogram's sample count. A metric with no matching sample is 0.
func Value(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// Series are the values of label in the samples of the named metric, in
// the registry's order: which series exist, at zero too.
func Series(tb testing.TB, g prometheus.Gatherer, name, label string) []string {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out = append(out, lp.GetValue())
				}
			}
		}
	}
	return out
}
