// Package localcluster runs a throwaway Kubernetes cluster on this machine:
// a real kube-apiserver and etcd (through controller-runtime's envtest) with
// kubemedic's CRDs installed (and, with Options.ThirdPartyCRDs, the real
// CRDs of Cluster API's Machine, MachineSet, MachineHealthCheck and Cluster
// and of Metal3's BareMetalHost; with Options.DRA, the API server also
// serves DRA's DeviceTaintRule), optionally kwok to play the kubelet for
// simulated GPU nodes (whole GPUs and MIG devices, the labels and capacity
// of the NVIDIA GPU operator, heartbeats, pod stages), realistic workload
// pods, node conditions written the way node-problem-detector writes them,
// and supervision of the other real processes a whole loop needs (NPD, the
// kubemedic binaries). It also runs the monitoring edge around the cluster:
// a real Prometheus (NewPrometheus) and Alertmanager (NewAlertmanager) on
// free 127.0.0.1 ports, and a stand-in for dcgm-exporter (NewDCGMExporter)
// serving GPU utilisation series the caller sets. `kubemedic-demo` and the
// integration tests (through test/harness) build on it, so that what they
// exercise is the real API server's validation, patch semantics and watch
// behaviour rather than a fake client.
//
// What must hold:
//
//   - It never talks to a cluster it did not start: it has no way to take a
//     kubeconfig or an existing API server, and it never reads the user's
//     kubeconfig. Everything it creates lives in its own temporary directory
//     and its own etcd.
//   - It never downloads anything. The binaries come from `make testbin`
//     (hack/testbin.sh) through $KUBEMEDIC_TESTBIN; when they are missing, New
//     fails and says to run `make testbin`.
//   - It leaks no process: every process it starts (kwok, etcd,
//     kube-apiserver, and those of StartProcess) runs in its own process
//     group with a parent-death signal, so it dies with this program even
//     when this program is killed, and Stop kills and reaps it.
//   - It runs no controllers of its own. Unless asked, no scheduler,
//     controller-manager or kubelet exists: nothing binds, garbage-collects
//     or evicts unless the caller or kwok does it, and objects it creates
//     look like the real controllers made them (owner references,
//     generated labels) with nothing keeping them in sync afterwards. With
//     Options.Scheduler and Options.ControllerManager the real
//     kube-scheduler and kube-controller-manager of the API server's
//     release run (SchedulingControllers says which controllers and why):
//     workloads from CreateWorkload get their pods from their controllers,
//     placed by the scheduler around cordons, taints and DeviceTaintRules.
//     Nothing evicts behind a test's back either way.
//   - It is shipped code: it takes no *testing.T and imports nothing under
//     test/. The testing.TB wrappers (harness.Start, StartPrometheus,
//     StartAlertmanager, StartDCGMExporter) and the test-only helpers
//     (testbin tools, `go build` of the binaries) live in test/harness,
//     which builds on this package. The GitHub and Slack stand-ins the demo
//     also runs are alertbridge/ghfake and internal/notify/notifytest.
package localcluster
