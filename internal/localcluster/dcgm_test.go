package localcluster_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// startDCGMExporter starts the stand-in and closes it when the test ends.
func startDCGMExporter(tb testing.TB) *localcluster.DCGMExporter {
	tb.Helper()
	d := localcluster.NewDCGMExporter()
	tb.Cleanup(d.Close)
	return d
}

func scrape(t testing.TB, d *localcluster.DCGMExporter) (int, string, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

func parse(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, "body:\n%s", body)
	return families
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestDCGMExporter(t *testing.T) {
	d := startDCGMExporter(t)
	require.NotContains(t, d.URL, "http://", "URL is host:port for a scrape config")

	whole := localcluster.DCGMSeries{Namespace: "ml", Pod: "trainer-0", Container: "main", Hostname: "gpu-node-1", UUID: "GPU-8f2c1d90-aaaa-bbbb-cccc-000000000001", GPU: 1}
	mig := localcluster.DCGMSeries{Namespace: "research", Pod: "nb-7", Container: "jupyter", Hostname: "gpu-node-1", UUID: "GPU-8f2c1d90-aaaa-bbbb-cccc-000000000002", GPU: 2, MIGInstance: "13", MIGProfile: "1g.10gb"}
	d.Set(whole, 37)
	d.Set(mig, 0.05)

	status, contentType, body := scrape(t, d)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", contentType, "Prometheus 3 refuses a scrape without a valid Content-Type")
	require.Equal(t, `# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-8f2c1d90-aaaa-bbbb-cccc-000000000001",pci_bus_id="00000000:19:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="550.127.05",container="main",namespace="ml",pod="trainer-0"} 37
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",UUID="GPU-8f2c1d90-aaaa-bbbb-cccc-000000000002",pci_bus_id="00000000:1A:00.0",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="13",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="550.127.05",container="jupyter",namespace="research",pod="nb-7"} 0.050000
`, body)

	families := parse(t, body)
	require.Len(t, families, 2)
	util := families["DCGM_FI_DEV_GPU_UTIL"]
	require.Equal(t, dto.MetricType_GAUGE, util.GetType())
	require.Len(t, util.GetMetric(), 1)
	require.Equal(t, 37.0, util.GetMetric()[0].GetGauge().GetValue())
	require.Equal(t, "trainer-0", labelMap(util.GetMetric()[0])["pod"])
	gr := families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
	require.Equal(t, 0.05, gr.GetMetric()[0].GetGauge().GetValue())
	require.Equal(t, "13", labelMap(gr.GetMetric()[0])["GPU_I_ID"])

	// A changed value is served on the next scrape; NaN is written as NaN.
	d.Set(whole, math.NaN())
	_, _, body = scrape(t, d)
	require.True(t, math.IsNaN(parse(t, body)["DCGM_FI_DEV_GPU_UTIL"].GetMetric()[0].GetGauge().GetValue()), body)

	// Delete removes the series, and an empty family has no HELP/TYPE lines.
	d.Delete(mig)
	d.Delete(mig) // deleting twice is harmless
	_, _, body = scrape(t, d)
	require.NotContains(t, body, "GR_ENGINE_ACTIVE")
	require.Len(t, parse(t, body), 1)

	// Down answers 503, and comes back with the same series.
	d.SetDown(true)
	status, _, _ = scrape(t, d)
	require.Equal(t, http.StatusServiceUnavailable, status)
	d.SetDown(false)
	status, _, body = scrape(t, d)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `pod="trainer-0"} NaN`)

	require.Equal(t, 5, d.Scrapes(), "refused scrapes count too")
}

func TestDCGMExporterEscapesLabelValues(t *testing.T) {
	d := startDCGMExporter(t)
	s := localcluster.DCGMSeries{Namespace: "ml", Pod: `we"ird\pod`, Container: "line\nbreak", UUID: "GPU-1"}
	d.Set(s, 1)
	_, _, body := scrape(t, d)
	got := labelMap(parse(t, body)["DCGM_FI_DEV_GPU_UTIL"].GetMetric()[0])
	require.Equal(t, `we"ird\pod`, got["pod"])
	require.Equal(t, "line\nbreak", got["container"])
}

func TestDCGMExporterManySeries(t *testing.T) {
	d := startDCGMExporter(t)
	const n = 50_000
	fill(d, n)
	_, _, body := scrape(t, d)
	families := parse(t, body)
	require.Equal(t, n, len(families["DCGM_FI_DEV_GPU_UTIL"].GetMetric())+len(families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].GetMetric()))
}

// fill sets n series: 8 GPUs per node, every tenth node on MIG instances.
func fill(d *localcluster.DCGMExporter, n int) []localcluster.DCGMSeries {
	all := make([]localcluster.DCGMSeries, 0, n)
	for i := range n {
		node, gpu := i/8, i%8
		s := localcluster.DCGMSeries{
			Namespace: fmt.Sprintf("team-%d", node%50),
			Pod:       fmt.Sprintf("job-%d-worker-0", node),
			Container: "main",
			Hostname:  fmt.Sprintf("gpu-node-%05d", node),
			UUID:      fmt.Sprintf("GPU-%08x-1d90-4c2e-9b7a-%012x", node, gpu),
			GPU:       gpu,
		}
		if node%10 == 0 {
			s.MIGInstance = fmt.Sprint(gpu + 1)
			d.Set(s, 0.25)
		} else {
			d.Set(s, float64(i%100))
		}
		all = append(all, s)
	}
	return all
}

// BenchmarkDCGMExporterScrape serves 50,000 series: "cached" scrapes an
// unchanged exporter, "changed" sets one value before every scrape (the body
// is rebuilt, the order is not).
func BenchmarkDCGMExporterScrape(b *testing.B) {
	d := startDCGMExporter(b)
	all := fill(d, 50_000)
	client := &http.Client{}
	get := func() int64 {
		resp, err := client.Get("http://" + d.URL + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("scrape: %v %s", err, resp.Status)
		}
		return n
	}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		var n int64
		for b.Loop() {
			n = get()
		}
		b.SetBytes(n)
	})
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		var n int64
		i := 0
		for b.Loop() {
			d.Set(all[i%len(all)], float64(i%100))
			i++
			n = get()
		}
		b.SetBytes(n)
	})
}

func TestDCGMExporterClose(t *testing.T) {
	d := localcluster.NewDCGMExporter()
	status, _, _ := scrape(t, d)
	require.Equal(t, http.StatusOK, status)
	d.Close()
	d.Close() // closing twice is harmless
	_, err := http.Get("http://" + d.URL + "/metrics")
	require.Error(t, err, "a closed exporter must not answer")
}
