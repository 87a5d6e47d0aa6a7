// Command metricnames prints the metric families that kubemedic's binaries
// register, one per line as "name<TAB>type<TAB>binary", for the tests of
// deploy/ that check every dashboard panel and alert against them.
//
// It calls the same constructors the binaries call (the remediator's and
// the janitor's NewMetrics, the alertbridge's bridge.New and
// ghclient.NewMetrics) with a Registerer that only asks each collector to
// describe itself, so a metric vector counts before it has a single series.
// It also prints the families of controller-runtime's registry, which the
// remediator and the janitor serve on /metrics (process_*, go_*,
// controller_runtime_*, workqueue_*, rest_client_*).
//
// It is a separate program, built by the test, so that the test package
// itself does not import the controllers.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	janitor "github.com/kubemedic/kubemedic/janitor/controller"
	remediator "github.com/kubemedic/kubemedic/remediator/controller"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "metricnames:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	names := map[string]family{}

	rem := &describer{binary: "kubemedic-remediator", out: names}
	if err := remediator.NewMetrics(nil).Register(rem); err != nil {
		return fmt.Errorf("remediator metrics: %w", err)
	}

	jan := &describer{binary: "kubemedic-janitor", out: names}
	if err := janitor.NewMetrics().Register(jan); err != nil {
		return fmt.Errorf("janitor metrics: %w", err)
	}

	ab := &describer{binary: "kubemedic-alertbridge", out: names}
	ghclient.NewMetrics(ab)
	dir, err := os.MkdirTemp("", "metricnames-journal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	j, err := journal.Open(dir, nil)
	if err != nil {
		return fmt.Errorf("alertbridge journal: %w", err)
	}
	defer j.Close()
	log := slog.New(slog.DiscardHandler)
	if _, err := bridge.New(bridge.Options{
		Config: &config.Config{}, Journal: j, GitHub: ghclient.NewDryRun(log, nil),
		Auth: bridge.Auth{Insecure: true}, Registry: ab, Log: log,
	}); err != nil {
		return fmt.Errorf("alertbridge: %w", err)
	}

	// Families with at least one series; the process and Go collectors
	// always have one.
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return fmt.Errorf("gather controller-runtime's registry: %w", err)
	}
	for _, mf := range mfs {
		kind := "other"
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			kind = "histogram"
		case dto.MetricType_SUMMARY:
			kind = "summary"
		}
		names[mf.GetName()] = family{kind: kind, binary: "controller-runtime"}
	}

	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		if _, err := fmt.Fprintf(w, "%s\t%s\t%s\n", n, names[n].kind, names[n].binary); err != nil {
			return err
		}
	}
	return nil
}

type family struct{ kind, binary string }

// describer is a prometheus.Registerer that records the families its
// collectors describe instead of registering them.
type describer struct {
	binary string
	out    map[string]family
}

var _ prometheus.Registerer = &describer{}

// fqName reads a Desc's name from its String form, the only public view
// of it: Desc{fqName: "name", help: ...}.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	kind := "other"
	switch v := c.(type) {
	case *prometheus.HistogramVec:
		kind = "histogram"
	case *prometheus.SummaryVec:
		kind = "summary"
	case prometheus.Metric:
		// A Histogram and a Summary have the same methods; what they
		// write tells them apart.
		var m dto.Metric
		if err := v.Write(&m); err == nil {
			switch {
			case m.Histogram != nil:
				kind = "histogram"
			case m.Summary != nil:
				kind = "summary"
			}
		}
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var errs []string
	for desc := range ch {
		m := fqName.FindStringSubmatch(desc.String())
		if m == nil {
			errs = append(errs, desc.String())
			continue
		}
		d.out[m[1]] = family{kind: kind, binary: d.binary}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: cannot read the name of %s", d.binary, strings.Join(errs, "; "))
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }
