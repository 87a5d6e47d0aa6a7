// Package harness starts a real Kubernetes control plane (kube-apiserver and
// etcd through controller-runtime's envtest) with kubemedic's CRDs installed,
// optionally kwok to play the kubelet for simulated nodes, and fills it with
// realistic GPU nodes, workload pods and node conditions written the way
// node-problem-detector writes them. Every integration test and the
// `kubemedic demo` command build on it, so that what they exercise is the
// real API server's validation, patch semantics and watch behaviour rather
// than a fake client.
//
// What must hold:
//
//   - It is test and demo infrastructure only. No production code path
//     imports it; the single exception is `kubemedic demo`, which runs a
//     throwaway local cluster on purpose.
//   - It never talks to a cluster it did not start: it has no way to take a
//     kubeconfig or an existing API server, and it never reads the user's
//     kubeconfig. Everything it creates lives in its own temporary directory
//     and its own etcd.
//   - It never downloads anything. The binaries come from `make testbin`
//     (hack/testbin.sh) through $KUBEMEDIC_TESTBIN; when they are missing, Start
//     fails and says to run `make testbin` instead of skipping, because a
//     skipped integration test is a green CI that tested nothing.
//   - It leaks no process: kwok, etcd and kube-apiserver each run in their own
//     process group with a parent-death signal, so they die with the test
//     binary even when it is killed, and Stop kills and reaps them.
//   - It runs no controllers of its own. No scheduler, controller-manager or
//     kubelet exists: nothing binds, garbage-collects or evicts unless a test
//     or kwok does it. Objects it creates look like the real controllers made
//     them (owner references, generated labels), but nothing keeps them in
//     sync afterwards.
package harness
