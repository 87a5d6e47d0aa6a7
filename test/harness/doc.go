// Package harness is the test side of internal/localcluster: testing.TB
// wrappers that start something for one test, fail the test when it does
// not start, and stop it when the test ends, plus helpers only tests and the
// scale programs under test/scale use.
//
// What lives here: Start (a local cluster per test), StartPrometheus,
// StartAlertmanager and StartDCGMExporter (wrappers, with type aliases
// Prometheus, Alertmanager, PostableAlert, DCGMSeries and DCGMExporter so
// that tests need not import localcluster), Tool and FreePort (testbin tools
// such as promtool and amtool, free ports) and GoBuild (`go build` of the
// project's own binaries).
//
// What lives in internal/localcluster, because `kubemedic-demo` runs it
// too: the cluster itself (control plane, kwok GPU nodes, pods, node
// conditions, process supervision), the real Prometheus and Alertmanager
// processes (NewPrometheus, NewAlertmanager) and the dcgm-exporter
// stand-in (NewDCGMExporter), with their tests. New code that needs no
// testing.TB belongs there, not here.
//
// What must hold:
//
//   - Only tests and test/scale import it; no shipped binary does
//     (cmd/deps_test.go checks every package under cmd/).
//   - A missing binary fails the test and says to run `make testbin`; it
//     never skips, because a skipped integration test is a green CI that
//     tested nothing. Only -short mode skips integration tests.
//   - Every process it starts is stopped when its test ends, and its log is
//     shown when the test failed.
package harness
