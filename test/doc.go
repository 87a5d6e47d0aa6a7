// Package test holds kubemedic's end-to-end and scale tests. They run a real
// kube-apiserver, etcd and kwok from internal/localcluster, started and
// stopped per test by test/harness, which also holds the test-only helpers
// (real Prometheus and Alertmanager processes, a dcgm-exporter stand-in).
package test
