// Package demo is kubemedic's whole loop on one machine, behind
// kubemedic-demo: a local control plane with simulated GPU nodes
// (internal/localcluster), fake host roots under the real NPD and
// kubemedic-detect, the remediator, janitor and alertbridge as processes,
// Prometheus and Alertmanager with the shipped rules, the GitHub and Slack
// stand-ins (alertbridge/ghfake, internal/notify/notifytest), a node
// simulator that plays the operation pods' effects, the scenarios
// (Scenarios, Inject) and the timeline a person watches.
//
// It composes the components, so it sits above all of them and only
// cmd/kubemedic-demo and the end-to-end tests (test/e2e) import it. It must
// never be linked by a shipped binary (cmd/deps_test.go), and it never
// changes a cluster other than the one it started.
package demo
