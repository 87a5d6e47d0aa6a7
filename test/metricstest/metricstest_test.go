package metricstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubemedic/kubemedic/test/metricstest"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"a", "b"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"})
	reg.MustRegister(c, h)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("x", "2").Add(3)
	c.WithLabelValues("y", "1").Add(5)
	h.Observe(1)
	h.Observe(2)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", map[string]string{"a": "x"}, 5},
		{"c_total", map[string]string{"a": "x", "b": "2"}, 3},
		{"c_total", map[string]string{"a": "z"}, 0},
		{"h", nil, 2},
		{"missing", nil, 0},
	} {
		if got := metricstest.Value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s %v: got %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

func TestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"controller"})
	reg.MustRegister(c)
	if got := metricstest.Series(t, reg, "c_total", "controller"); len(got) != 0 {
		t.Errorf("no series yet: got %v", got)
	}
	c.WithLabelValues("b")
	c.WithLabelValues("a").Inc()
	got := metricstest.Series(t, reg, "c_total", "controller")
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("got %v, want [a b], a zero series included", got)
	}
}
