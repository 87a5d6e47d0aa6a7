// Package democli is the command tree of kubemedic-demo: start the whole
// loop on one machine (package demo), and `inject` and `scenario` against a
// running one. It writes only to the demo's own local cluster, whose state
// file it read.
package democli
