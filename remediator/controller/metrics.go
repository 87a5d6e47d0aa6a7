package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

// Metrics are the remediator's Prometheus metrics. Counts of objects are
// computed from the cache at scrape time, never kept in memory.
type Metrics struct {
	breakerOpen     *prometheus.GaugeVec
	blocked         *prometheus.CounterVec
	timeToRemediate *prometheus.HistogramVec
	notifications   *prometheus.CounterVec
	captures        *prometheus.CounterVec
	// validations and validationSeconds: the validation gate's tests that
	// ended.
	validations       *prometheus.CounterVec
	validationSeconds *prometheus.HistogramVec
	// nodeValidations: the tests of ValidationPolicies (join, background)
	// that ended, with or without a result.
	nodeValidations *prometheus.CounterVec
	ruleChecks      *prometheus.CounterVec
	// conflicts counts the reconciles that lost an optimistic-concurrency
	// race and were requeued quietly (ctrlmgr.QuietConflicts), by
	// controller.
	conflicts *prometheus.CounterVec
	objects   *objectCollector
	// stack are the GPU stack health checks' (see Options.StackHealth).
	stack *stackhealth.Metrics
}

// Results of a Slack message to the owner of a pod a drain stopped, the
// values of kubemedic_remediation_notifications_total's result label.
const (
	notificationSent    = "sent"
	notificationFailed  = "failed"
	notificationDropped = "dropped"
)

// NewMetrics creates the metrics; reader is the manager's cached client.
func NewMetrics(reader client.Reader) *Metrics {
	return &Metrics{
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubemedic_remediation_breaker_open",
			Help: "1 while the policy's circuit breaker is open and it starts nothing new.",
		}, []string{"policy"}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_blocked_total",
			Help: "Times an operation was held back or skipped by a safety limit, by the limit's reason.",
		}, []string{"policy", "reason"}),
		timeToRemediate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubemedic_remediation_time_to_remediate_seconds",
			Help:    "From the trigger condition's last transition to the operation's success.",
			Buckets: []float64{60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400},
		}, []string{"policy", "step"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_notifications_total",
			Help: "Slack messages to the owners of pods a drain stopped, by result: sent (each post Slack accepted, repeats included); failed (a post Slack refused or did not answer in time; sent again once its claim expires, unless refused for good); dropped (never sent: the operation's status held no room for its notice).",
		}, []string{"result"}),
		captures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_captures_total",
			Help: "Diagnostics captures that ended, by policy and result: Captured, Partial (a bundle, some parts failed) or Failed (no bundle; the repair went on unless the capture was required).",
		}, []string{"policy", "result"}),
		validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_validations_total",
			Help: "Active GPU tests of the validation gate that ended, by policy, test (dcgm, nccl, nvbandwidth; none when no report came) and result: Passed (the node was uncordoned) or Failed (a GPU failed, or no answer twice; the node stays cordoned and the ladder moves on).",
		}, []string{"policy", "test", "result"}),
		validationSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubemedic_remediation_validation_duration_seconds",
			Help:    "From the last attempt's test pod's creation to the gate's verdict, by policy and result.",
			Buckets: []float64{10, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600},
		}, []string{"policy", "result"}),
		nodeValidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_validation_tests_total",
			Help: "Active GPU tests of ValidationPolicies that ended, by policy, mode (Join: a node with the taint kubemedic.io/unvalidated; Background: an idle node) and result: Passed, Failed (a GPU failed, or no answer twice; GPUValidationFailed is set), Preempted (the pod was preempted or deleted before it ended: no result) or PutOff (the GPUs were busy for the whole wait: no result).",
		}, []string{"policy", "mode", "result"}),
		ruleChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_gpu_exclusion_checks_total",
			Help: "Checks of kubemedic's DeviceTaintRules against the devices their nodes publish, by verdict: Keep (selects its GPU, or no device), Move (the GPU has another device name now; the rule follows it), Release (the device is another GPU now, or the node is gone; the rule is deleted), Unknown (nothing published yet, or ambiguous; the rule stays), Error (the check or its write failed; a write that conflicted is counted in kubemedic_remediation_conflicts_total instead, and checked again next time).",
		}, []string{"verdict"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_remediation_conflicts_total",
			Help: "Reconciles that ended in an optimistic-concurrency conflict (another writer, or the cache not yet holding the last write) and were requeued without an error log, by controller. Routine; a steady climb with no progress is a writer fight.",
		}, []string{"controller"}),
		objects: &objectCollector{reader: reader,
			operations: prometheus.NewDesc("kubemedic_remediation_operations",
				"NodeOperations by policy, step and phase.", []string{"policy", "step", "phase"}, nil),
			quarantined: prometheus.NewDesc("kubemedic_remediation_quarantined_nodes",
				"Nodes carrying the kubemedic.io/quarantined taint.", nil, nil),
			nodeQuarantined: prometheus.NewDesc("kubemedic_remediation_node_quarantined",
				"1 for each node carrying the kubemedic.io/quarantined taint; nodes without it have no series.", []string{"node"}, nil),
			nodeRepair: prometheus.NewDesc("kubemedic_remediation_node_repair_timestamp_seconds",
				"For each node kubemedic is repairing or failed to repair, by state: active, when the newest repair in progress on the node started; failed, when the node's newest finished operation ended, if it Failed. Repairs are the operations of a policy, not manual ones or a quarantine; a node with neither state has no series.",
				[]string{"node", "state"}, nil),
		},
		stack: stackhealth.NewMetrics(),
	}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, result := range []string{notificationSent, notificationFailed, notificationDropped} {
		m.notifications.WithLabelValues(result)
	}
	for _, v := range devicetaint.Verdicts {
		m.ruleChecks.WithLabelValues(v.String())
	}
	m.ruleChecks.WithLabelValues(ruleCheckError)
	for _, c := range append([]prometheus.Collector{m.breakerOpen, m.blocked, m.timeToRemediate, m.notifications, m.captures, m.validations, m.validationSeconds, m.nodeValidations, m.ruleChecks, m.conflicts, m.objects}, m.stack.Collectors()...) {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// objectCollector counts operations and quarantined nodes from the cache.
// The per-node series are bounded by the nodes kubemedic acts on, not by
// the fleet: kubemedic_remediation_node_quarantined has one series per
// quarantined node (which the attempt caps and the breaker keep few), and
// kubemedic_remediation_node_repair_timestamp_seconds one per node with a
// repair in progress (bounded by maxConcurrent) or whose newest finished
// operation failed (a ladder escalates or quarantines next, so few).
type objectCollector struct {
	reader client.Reader
	// nodes lists the cached nodes without copying them; nil: through reader.
	nodes           NodeLister
	operations      *prometheus.Desc
	quarantined     *prometheus.Desc
	nodeQuarantined *prometheus.Desc
	nodeRepair      *prometheus.Desc
	mu              sync.Mutex // one scrape at a time
}

// Values of kubemedic_remediation_node_repair_timestamp_seconds's state
// label.
const (
	repairActive = "active"
	repairFailed = "failed"
)

func (c *objectCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.operations
	ch <- c.quarantined
	ch <- c.nodeQuarantined
	ch <- c.nodeRepair
}

func (c *objectCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background()
	var ops v1alpha1.NodeOperationList
	if err := c.reader.List(ctx, &ops, client.UnsafeDisableDeepCopy); err == nil {
		type key struct{ policy, step, phase string }
		counts := map[key]int{}
		for i := range ops.Items {
			op := &ops.Items[i]
			phase := string(op.Status.Phase)
			if phase == "" {
				phase = string(v1alpha1.PhasePending)
			}
			counts[key{op.Spec.Policy, stepLabel(op), phase}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.operations, prometheus.GaugeValue, float64(n), k.policy, k.step, k.phase)
		}
		for node, r := range nodeRepairs(ops.Items) {
			if !r.active.IsZero() {
				ch <- prometheus.MustNewConstMetric(c.nodeRepair, prometheus.GaugeValue, unixSeconds(r.active), node, repairActive)
			}
			if r.lastFailed {
				ch <- prometheus.MustNewConstMetric(c.nodeRepair, prometheus.GaugeValue, unixSeconds(r.lastFinished), node, repairFailed)
			}
		}
	}
	if nodes, err := nodesOf(ctx, c.nodes, c.reader); err == nil {
		n := 0
		for _, node := range nodes {
			if plan.Quarantined(node) {
				n++
				ch <- prometheus.MustNewConstMetric(c.nodeQuarantined, prometheus.GaugeValue, 1, node.Name)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.GaugeValue, float64(n))
	}
}

// nodeRepair is what kubemedic_remediation_node_repair_timestamp_seconds
// says of one node.
type nodeRepair struct {
	// active is when the newest repair in progress started; zero for none.
	active time.Time
	// lastFinished is when the node's newest finished operation ended, and
	// lastFailed whether it Failed; lastCreated breaks a tie of end times
	// (whole seconds in the API), the one made later being the newer.
	lastFinished, lastCreated time.Time
	lastFailed                bool
}

// nodeRepairs reads the nodes' repairs from their operations: only those a
// policy made (manual ones are planned work, not an incident). A repair is
// in progress from its start (leaving WaitingForBudget) to its end; a
// quarantine is no repair, but when it is a node's newest finished
// operation, the failure before it is history. Only nodes with a repair in
// progress or a failed newest operation are returned.
func nodeRepairs(ops []v1alpha1.NodeOperation) map[string]nodeRepair {
	out := map[string]nodeRepair{}
	for i := range ops {
		op := &ops[i]
		if op.Spec.Policy == "" || op.Spec.NodeName == "" {
			continue
		}
		r := out[op.Spec.NodeName]
		switch st := op.Status; {
		case !st.Phase.Finished():
			if !op.Spec.Quarantine && st.StartTime != nil && st.StartTime.After(r.active) {
				r.active = st.StartTime.Time
			}
		case st.CompletionTime == nil:
		case st.CompletionTime.After(r.lastFinished),
			st.CompletionTime.Time.Equal(r.lastFinished) && !op.CreationTimestamp.Time.Before(r.lastCreated):
			r.lastFinished, r.lastCreated, r.lastFailed = st.CompletionTime.Time, op.CreationTimestamp.Time, st.Phase == v1alpha1.PhaseFailed
		}
		out[op.Spec.NodeName] = r
	}
	for node, r := range out {
		if r.active.IsZero() && !r.lastFailed {
			delete(out, node)
		}
	}
	return out
}

// unixSeconds is t as a Prometheus timestamp gauge value.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// stepLabel is the step for metrics: the step name, "quarantine" for the
// quarantine at the end of a ladder, "manual" for a hand-made operation.
func stepLabel(op *v1alpha1.NodeOperation) string {
	switch {
	case op.Spec.Step != "":
		return op.Spec.Step
	case op.Spec.Quarantine:
		return "quarantine"
	case op.Spec.Policy == "":
		return "manual"
	}
	return op.Spec.Operation
}
