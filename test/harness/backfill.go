package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

// DCGMHistory is a past of dcgm-exporter series, to be backfilled into a
// Prometheus TSDB with promtool instead of being scraped for hours: one
// sample per series every Step in [Start, End), with the value Value gives.
type DCGMHistory struct {
	Series     []DCGMSeries
	Start, End time.Time
	Step       time.Duration
	// Value is series i's value at t; ok false writes no sample (a failed
	// scrape, or a series not there yet or any more). NaN writes a NaN
	// sample, as dcgm-exporter can.
	Value func(i int, t time.Time) (v float64, ok bool)
}

// WriteOpenMetrics writes h in the OpenMetrics text format that
// `promtool tsdb create-blocks-from openmetrics` reads: each family's
// samples together, in time order, labelled as the stand-in exporter
// labels them (localcluster.DCGMSeries.Line), timestamps in seconds.
func (h DCGMHistory) WriteOpenMetrics(w io.Writer) error {
	if h.Step <= 0 || !h.Start.Before(h.End) {
		return fmt.Errorf("history: step %s, [%s, %s) is empty", h.Step, h.Start, h.End)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	prefixes := make([]string, len(h.Series))
	for i, s := range h.Series {
		prefixes[i] = localcluster.DCGMLinePrefix(s)
	}
	var buf []byte
	for _, family := range []gpuutil.Metric{gpuutil.MetricGPUUtil, gpuutil.MetricGREngineActive} {
		wrote := false
		for t := h.Start; t.Before(h.End); t = t.Add(h.Step) {
			ts := strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
			for i, s := range h.Series {
				if localcluster.DCGMFamily(s) != string(family) {
					continue
				}
				v, ok := h.Value(i, t)
				if !ok {
					continue
				}
				if !wrote {
					fmt.Fprintf(bw, "# TYPE %s gauge\n", family)
					wrote = true
				}
				buf = append(buf[:0], prefixes[i]...)
				if math.IsNaN(v) {
					buf = append(buf, "NaN"...)
				} else {
					buf = strconv.AppendFloat(buf, v, 'f', -1, 64)
				}
				buf = append(buf, ' ')
				buf = append(buf, ts...)
				buf = append(buf, '\n')
				if _, err := bw.Write(buf); err != nil {
					return err
				}
			}
		}
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// Backfill writes h into dataDir (a Prometheus data directory, which may
// not be in use yet) as TSDB blocks, with promtool. The OpenMetrics file is
// written next to dataDir and removed afterwards.
func Backfill(ctx context.Context, h DCGMHistory, dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dataDir), "history-*.om")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := h.WriteOpenMetrics(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return BackfillFile(ctx, f.Name(), dataDir)
}

// BackfillFile turns the OpenMetrics file into TSDB blocks in dataDir with
// promtool, adding labels ("name=value") to every series: a scrape's job
// and instance, so that the past and the scrapes that follow it are one
// series.
func BackfillFile(ctx context.Context, file, dataDir string, labels ...string) error {
	promtool, err := localcluster.Binary("promtool")
	if err != nil {
		return err
	}
	args := []string{"tsdb", "create-blocks-from", "openmetrics", "--quiet"}
	for _, l := range labels {
		args = append(args, "--label="+l)
	}
	return runTool(ctx, promtool, append(args, file, dataDir)...)
}

// BackfillRules evaluates the recording rules of rulesFile over [start,
// end] against the Prometheus at url, as that Prometheus would have at the
// group's interval and phase (promtool gives the group the phase of the
// file's path: the same path in Prometheus' rule_files keeps the grid),
// and moves the blocks into dataDir, the data directory of that
// Prometheus, which loads them within its block reload interval (a
// minute) or at its next start. promtool stamps each bucket with its
// evaluation's time: a group's query_offset does not apply here. Rules
// must not read other rules' records.
func BackfillRules(ctx context.Context, url, rulesFile, dataDir string, start, end time.Time) error {
	promtool, err := localcluster.Binary("promtool")
	if err != nil {
		return err
	}
	out, err := os.MkdirTemp(filepath.Dir(dataDir), "rule-blocks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	if err := runTool(ctx, promtool, "tsdb", "create-blocks-from", "rules",
		"--start="+strconv.FormatInt(start.Unix(), 10), "--end="+strconv.FormatInt(end.Unix(), 10),
		"--url="+url, "--output-dir="+out, rulesFile); err != nil {
		return err
	}
	blocks, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if err := os.Rename(filepath.Join(out, b.Name()), filepath.Join(dataDir, b.Name())); err != nil {
			return err
		}
	}
	return nil
}

func runTool(ctx context.Context, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(path), strings.Join(args[:min(len(args), 3)], " "), err, tail)
	}
	return nil
}

// WriteJanitorBucketRules writes the group gpuutil.BucketGroup of the
// shipped PrometheusRule (deploy/prometheus/prometheusrule.yaml) as a
// Prometheus rules file at path, for promtool and for a Prometheus'
// rule_files.
func WriteJanitorBucketRules(path string) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	src := filepath.Join(root, "deploy", "prometheus", "prometheusrule.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var pr struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	for _, g := range pr.Spec.Groups {
		if g["name"] == gpuutil.BucketGroup {
			out, err := yaml.Marshal(map[string]any{"groups": []any{g}})
			if err != nil {
				return err
			}
			return os.WriteFile(path, out, 0o644)
		}
	}
	return fmt.Errorf("%s: no group %s", src, gpuutil.BucketGroup)
}
