// Package cli is the command tree of the kubemedic ops CLI. Commands parse
// flags and print; the work is done by the packages they call (policies,
// remediator/plan for `policy simulate` and `status`, janitor/decide for
// `janitor plan`, alertbridge/render for `alertbridge render`). It changes
// a cluster in one place only, `diag flush`, which annotates one Node: `policy
// simulate`, `status`, `janitor plan`, `diag list` and `diag get` read a live
// cluster through a client whose transport refuses every request but GET. It links no stand-in, no envtest and no S3 client
// (cmd/deps_test.go): the demo is kubemedic-demo, a binary of its own, which
// reuses Execute and NewClient from here.
package cli
