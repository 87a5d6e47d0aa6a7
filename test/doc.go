// Package test holds kubemedic's end-to-end and scale tests; the shared
// harness that starts a real kube-apiserver, etcd and kwok is in
// test/harness.
package test
