// Package e2e runs the whole loop the way `make demo` does — real
// kube-apiserver, etcd, kwok, node-problem-detector with kubemedic-detect on
// fake node roots, the remediator, alertbridge and janitor as processes,
// Prometheus and Alertmanager with the shipped rules, and the GitHub and
// Slack stand-ins — and checks the demo's scenarios end where they should:
// on the API objects, the stand-in's issues and the Slack messages, never
// on log text. It prints the time of each stage, so that a slower
// detect→heal shows.
package e2e
