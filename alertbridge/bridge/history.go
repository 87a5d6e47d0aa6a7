package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// NodeOperations lists the NodeOperations of nodes, for the operation
// history in the issue of a group whose alerts name a node (package kube on
// a cluster). It must honour ctx; the bridge bounds every call anyway.
type NodeOperations interface {
	NodeOperations(ctx context.Context, nodes []string) ([]v1alpha1.NodeOperation, error)
}

// nodeHistory reads the operation history of the nodes the group's alerts
// name and renders its section; "" when the history is off or the alerts
// name no node. It never fails and never waits longer than the history
// timeout: a read that errs or takes too long gives a section that says
// the history is unknown, and why.
func (b *Bridge) nodeHistory(ctx context.Context, log *slog.Logger, msg *payload.Message) string {
	if b.nodeOps == nil {
		return ""
	}
	nodes, more := render.HistoryNodes(msg)
	if len(nodes) == 0 {
		return ""
	}
	ops, err := b.readNodeOps(ctx, nodes)
	if err != nil {
		b.metrics.historyReads.WithLabelValues("error").Inc()
		log.Warn("Cannot read the operation history of the nodes; the issue says it is unknown", "nodes", nodes, "err", err)
	} else {
		b.metrics.historyReads.WithLabelValues("ok").Inc()
	}
	hs := make([]render.NodeHistory, len(nodes))
	for i, n := range nodes {
		hs[i] = render.NodeHistory{Node: n, Operations: ops, Err: err}
	}
	return render.HistorySection(hs, more, b.cfg.NodeHistory.MaxOperations, b.clock.Now())
}

// readNodeOps lists the NodeOperations of nodes, and never waits longer
// than the history timeout, even on a reader that ignores its context: a
// stuck read is left behind and its answer dropped.
func (b *Bridge) readNodeOps(ctx context.Context, nodes []string) ([]v1alpha1.NodeOperation, error) {
	type result struct {
		ops []v1alpha1.NodeOperation
		err error
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.NodeHistoryTimeout)
	defer cancel()
	done := make(chan result, 1) // the reader never blocks on a timed-out send
	go func() {
		ops, err := b.nodeOps.NodeOperations(rctx, nodes)
		done <- result{ops, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-rctx.Done():
		r.err = rctx.Err()
	}
	if r.err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		r.err = fmt.Errorf("no answer from the Kubernetes API within %s", b.opts.NodeHistoryTimeout)
	}
	return r.ops, r.err
}
