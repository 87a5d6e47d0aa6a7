// Package harness is the test side of internal/localcluster: Start runs a
// local cluster for one test and stops it when the test ends, and the rest
// are helpers only tests and the scale programs under test/scale use — real
// Prometheus and Alertmanager processes on free ports, a dcgm-exporter
// stand-in, the testbin tools (promtool, amtool) and `go build` of the
// project's own binaries. The cluster itself (control plane, kwok GPU nodes,
// pods, node conditions, process supervision) lives in internal/localcluster,
// which `kubemedic demo` shares.
//
// What must hold:
//
//   - Only tests and test/scale import it; no shipped binary does
//     (cmd/kubemedic/cli/deps_test.go checks every binary under cmd/).
//   - A missing binary fails the test and says to run `make testbin`; it
//     never skips, because a skipped integration test is a green CI that
//     tested nothing. Only -short mode skips integration tests.
//   - Every process it starts is stopped when its test ends, and its log is
//     shown when the test failed.
package harness
