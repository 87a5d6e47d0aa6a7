package harness

import (
	"testing"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// DCGMSeries is localcluster.DCGMSeries: one GPU or MIG instance as
// dcgm-exporter labels it.
type DCGMSeries = localcluster.DCGMSeries

// DCGMExporter is localcluster.DCGMExporter, the dcgm-exporter stand-in.
type DCGMExporter = localcluster.DCGMExporter

// StartDCGMExporter starts a stand-in dcgm-exporter with no series
// (localcluster.NewDCGMExporter) and closes it when the test ends.
func StartDCGMExporter(tb testing.TB) *DCGMExporter {
	tb.Helper()
	d := localcluster.NewDCGMExporter()
	tb.Cleanup(d.Close)
	return d
}

// NewDCGMExporter is localcluster.NewDCGMExporter, kept for the programs
// under test/scale.
func NewDCGMExporter() *DCGMExporter { return localcluster.NewDCGMExporter() }
