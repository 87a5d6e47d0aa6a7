// Package kube is the detectors' narrow view of Kubernetes: this node's
// labels and the pods on this node. It asks the local kubelet first and the
// API server second, and never lists pods cluster-wide. It decodes only the
// fields it needs.
//
// It talks HTTP with the standard library and must not import client-go
// (rest, clientcmd or the clientset) or k8s.io/api: kubemedic-detect is a
// process NPD starts every 30 s per check on every node, and those packages'
// init functions alone cost each invocation more CPU and memory than most
// checks do (about 150 package inits and 7 MiB; docs/detectors.md). The
// credentials it understands are the in-cluster service account and the
// subset of a kubeconfig that names a server, its CA, and a token, token
// file, client certificate or basic auth. A kubeconfig that asks for more
// (exec or auth-provider plugins, impersonation) is an error, never a
// request sent with a different identity.
package kube
