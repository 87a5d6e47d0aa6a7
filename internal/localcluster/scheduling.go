package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The scheduling stack: the real kube-scheduler and kube-controller-manager
// of the API server's release, from the testbin cache.
const (
	binScheduler         = "kube-scheduler"
	binControllerManager = "kube-controller-manager"

	// schedulingStartTimeout bounds the start of the scheduler and of the
	// controller-manager each, until their readiness endpoint answers 200.
	// Both are ready in about 2 s; the margin is for a loaded 2-core machine.
	schedulingStartTimeout = 60 * time.Second
)

// SchedulingControllers are the controllers kube-controller-manager runs
// under Options.ControllerManager, and why each:
//
//   - deployment, replicaset, statefulset, job and daemonset: the workloads
//     whose pods a drain evicts and a janitor reclaim scales away are
//     recreated (or removed) by their own controllers, as in a cluster;
//   - garbage-collector: a deleted owner takes its dependents along, and
//     orphans are adopted or released as in a cluster;
//   - disruption: it computes a PodDisruptionBudget's status, which the API
//     server's eviction subresource reads to allow or refuse an eviction;
//   - resourceclaim: it makes a pod's ResourceClaims from its
//     ResourceClaimTemplates, which the scheduler then allocates;
//   - node-lifecycle: the API server's TaintNodesByCondition admission
//     gives every new node the node.kubernetes.io/not-ready:NoSchedule
//     taint, and this controller removes it once the node reports Ready
//     (kwok's lease renewals are its heartbeats). Without it no pod would
//     ever be scheduled. It also taints NotReady and unreachable nodes, as
//     in a cluster. It evicts nothing: since Kubernetes 1.29 the evictions
//     for NoExecute taints are the taint-eviction-controller's, which is
//     left out (TestSchedulingStack proves a pod stays on a node with a
//     NoExecute taint it does not tolerate).
//
// Left out on purpose:
//
//   - taint-eviction-controller and device-taint-eviction-controller: they
//     evict pods behind a test's back when a test marks a node NotReady or
//     unreachable; kubemedic's own drain is what tests watch move pods
//     (and kubemedic's DeviceTaintRules are NoSchedule);
//   - serviceaccount and serviceaccount-token: the API server runs without
//     the ServiceAccount admission plugin (as envtest starts it), so pods
//     need no token;
//   - the rest (endpoints, namespace, quota, volumes, certificates, ...):
//     nothing here uses them, and each costs memory and watches.
var SchedulingControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"job-controller",
	"daemonset-controller",
	"garbage-collector-controller",
	"disruption-controller",
	"resourceclaim-controller",
	"node-lifecycle-controller",
}

// StartScheduler starts the real kube-scheduler against the cluster's API
// server, for a Cluster created without Options.Scheduler, and returns once
// it reports ready (its informers synced). It runs with the feature gates
// of the API server (Options.DRA's), so it honours DeviceTaintRules and
// allocates ResourceClaims as a 1.36 cluster's scheduler does. It does
// nothing when the scheduler already runs. ctx bounds the start only.
func (e *Cluster) StartScheduler(ctx context.Context) error {
	return e.startComponent(ctx, binScheduler, "/readyz", nil)
}

// StartControllerManager starts the real kube-controller-manager against
// the cluster's API server with the controllers of SchedulingControllers,
// for a Cluster created without Options.ControllerManager, and returns once
// it is healthy. It does nothing when it already runs. ctx bounds the start
// only.
func (e *Cluster) StartControllerManager(ctx context.Context) error {
	return e.startComponent(ctx, binControllerManager, "/healthz", []string{
		"--controllers=" + strings.Join(SchedulingControllers, ","),
		// The tests create and scale workloads in bursts: client-go's
		// default of 20 QPS would make the controllers lag behind them.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	})
}

// SchedulerPID returns the process id of kube-scheduler, or 0 when it does
// not run.
func (e *Cluster) SchedulerPID() int { return e.componentPID(binScheduler) }

// ControllerManagerPID returns the process id of kube-controller-manager,
// or 0 when it does not run.
func (e *Cluster) ControllerManagerPID() int { return e.componentPID(binControllerManager) }

func (e *Cluster) componentPID(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.components[name]; p != nil {
		return p.PID()
	}
	return 0
}

// componentFlags are the flags kube-scheduler and kube-controller-manager
// share: the admin kubeconfig for their work and for delegated
// authentication and authorization of their own endpoints, one instance
// (no leader election), a self-signed serving certificate on a free
// loopback port, and the API server's feature gates.
func (e *Cluster) componentFlags(name string, port int) []string {
	f := []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.tmpDir, name+"-certs"),
	}
	if e.opts.DRA {
		for _, fl := range DRAFlags {
			if fl.Name == "feature-gates" {
				f = append(f, "--feature-gates="+fl.Value)
			}
		}
	}
	return f
}

// startComponent starts the control plane binary name with the shared flags
// and extra, and waits until path on its secure port answers 200.
func (e *Cluster) startComponent(ctx context.Context, name, path string, extra []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return fmt.Errorf("start %s: the cluster is stopped", name)
	}
	if e.components[name] != nil {
		return nil
	}
	if err := checkBinaries(e.BinDir, name); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Join(e.tmpDir, name+"-certs"), 0o700); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p, err := e.startProcessLocked(ProcessSpec{
		Name: name,
		Path: filepath.Join(e.BinDir, name),
		Args: append(e.componentFlags(name, port), extra...),
	})
	if err != nil {
		return err
	}
	e.logf("localcluster: starting %s (pid %d, log %s)", name, p.PID(), p.LogPath())
	begin := time.Now()
	url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path
	if err := p.WaitHTTPOK(ctx, url, schedulingStartTimeout); err != nil {
		return errors.Join(fmt.Errorf("start %s: %w", name, err), p.Stop())
	}
	e.logf("localcluster: %s up in %s", name, time.Since(begin).Round(time.Millisecond))
	if e.components == nil {
		e.components = map[string]*Process{}
	}
	e.components[name] = p
	return nil
}
