package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Labels and resources of GPU nodes as the NVIDIA GPU operator (GPU feature
// discovery, device plugin, MIG manager) and the cloud provider set them.
const (
	// RackLabel names the rack of a node, "<zone>-rack-<n>". Kubernetes has
	// no well-known key for racks (only region and zone), so simulated nodes
	// carry this one in kubemedic's own domain.
	RackLabel = "kubemedic.io/rack"

	// ResourceGPU is the whole-GPU extended resource of the device plugin.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

	// Labels of GPU feature discovery and the MIG manager.
	LabelGPUPresent  = "nvidia.com/gpu.present"
	LabelGPUCount    = "nvidia.com/gpu.count"
	LabelGPUProduct  = "nvidia.com/gpu.product"
	LabelGPUMemory   = "nvidia.com/gpu.memory"
	LabelGPUFamily   = "nvidia.com/gpu.family"
	LabelMIGCapable  = "nvidia.com/mig.capable"
	LabelMIGStrategy = "nvidia.com/mig.strategy"

	// KubeletVersion is what simulated nodes report as their kubelet version,
	// the version of the test kube-apiserver.
	KubeletVersion = "v1.36.3"
)

// gpuProduct describes a GPU model as the node labels and MIG profiles show it.
type gpuProduct struct {
	memoryMiB    int
	family       string
	instanceType string // 8-GPU cloud instance carrying it
	migProfile   string // the 3g profile: two of them fill one GPU
}

var gpuProducts = map[string]gpuProduct{
	"NVIDIA-H100-80GB-HBM3": {81559, "hopper", "p5.48xlarge", "3g.40gb"},
	"NVIDIA-H200":           {143771, "hopper", "p5e.48xlarge", "3g.71gb"},
	"NVIDIA-A100-SXM4-80GB": {81920, "ampere", "p4de.24xlarge", "3g.40gb"},
	"NVIDIA-A100-SXM4-40GB": {40960, "ampere", "p4d.24xlarge", "3g.20gb"},
}

// DefaultProduct is the GPU model of NodeSpec when none is given.
const DefaultProduct = "NVIDIA-H100-80GB-HBM3"

// NodeSpec describes a batch of GPU nodes for CreateGPUNodes. The zero value
// makes 8-GPU H100 nodes spread over two zones with two racks each.
type NodeSpec struct {
	// NamePrefix of the node names, which are <prefix>-000, <prefix>-001, ...
	// Default "gpu-node".
	NamePrefix string
	// Start is the index of the first node, so that batches can continue a
	// numbering; it also drives zone, rack and addresses.
	Start int
	// GPUs per node. Default 8.
	GPUs int
	// Product is the GPU model label. Default DefaultProduct.
	Product string
	// InstanceType is the node.kubernetes.io/instance-type label. Default:
	// the 8-GPU instance of Product (p5.48xlarge for H100).
	InstanceType string
	// Zones are assigned round robin. Default {"zone-a", "zone-b"}.
	Zones []string
	// RacksPerZone is the number of racks in each zone (RackLabel), filled
	// round robin as well. Default 2.
	RacksPerZone int
	// MIGEvery makes every k-th node (index % k == k-1) a MIG node with the
	// mixed strategy: half of its GPUs (at least one) are split into two
	// MIGProfile instances each and the others stay whole, so it exposes
	// fewer nvidia.com/gpu and 2*(GPUs/2) of the MIG resource. 0: none.
	MIGEvery int
	// MIGProfile is the MIG resource of MIG nodes, e.g.
	// "nvidia.com/mig-3g.40gb". Default: the 3g profile of Product.
	MIGProfile string
	// Labels are added to every node; they win over the generated ones.
	Labels map[string]string
	// Taints are the taints every node registers with, as the kubelet's
	// --register-with-taints sets them: present from the node's creation,
	// so that no pod is placed before they are.
	Taints []corev1.Taint
	// ResourceSlices also publishes each node's GPUs through DRA, as
	// NVIDIA's DRA driver does: one ResourceSlice of NVIDIADRADriver per
	// node (CreateGPUResourceSlice) with the node's whole GPUs, named
	// gpu-<i> with UUID GPUUUID(node, i). The node keeps its nvidia.com/gpu
	// capacity too, so a test chooses per pod how it asks for GPUs; a pod
	// that asked both ways could get the same simulated GPU twice. Claims
	// also need the DeviceClass (CreateGPUDeviceClass).
	ResourceSlices bool
}

func (s *NodeSpec) defaults() {
	if s.NamePrefix == "" {
		s.NamePrefix = "gpu-node"
	}
	if s.GPUs == 0 {
		s.GPUs = 8
	}
	if s.Product == "" {
		s.Product = DefaultProduct
	}
	p, known := gpuProducts[s.Product]
	if s.InstanceType == "" {
		if known {
			s.InstanceType = p.instanceType
		} else {
			s.InstanceType = "gpu-" + strconv.Itoa(s.GPUs) + "x"
		}
	}
	if len(s.Zones) == 0 {
		s.Zones = []string{"zone-a", "zone-b"}
	}
	if s.RacksPerZone <= 0 {
		s.RacksPerZone = 2
	}
	if s.MIGProfile == "" {
		profile := "3g.40gb"
		if known {
			profile = p.migProfile
		}
		s.MIGProfile = "nvidia.com/mig-" + profile
	}
}

// NodeName returns the name CreateGPUNodes gives to node index i.
func (s NodeSpec) NodeName(i int) string {
	prefix := s.NamePrefix
	if prefix == "" {
		prefix = "gpu-node"
	}
	return fmt.Sprintf("%s-%03d", prefix, i)
}

// nodeCreateWorkers bounds the concurrent creates of CreateGPUNodes.
const nodeCreateWorkers = 16

// CreateGPUNodes creates n nodes with indexes spec.Start to spec.Start+n-1,
// looking like GPU nodes of a cloud cluster, annotated for kwok. When kwok
// runs it waits until kwok has made them Ready; without kwok it creates them
// with the conditions a healthy kubelet posts. It returns the nodes as they
// are then, in index order.
func (e *Cluster) CreateGPUNodes(ctx context.Context, n int, spec NodeSpec) ([]corev1.Node, error) {
	if n < 0 {
		return nil, fmt.Errorf("create %d nodes: negative count", n)
	}
	if n == 0 {
		return nil, nil
	}
	spec.defaults()
	withKwok := e.KwokPID() != 0
	nodes := make([]corev1.Node, n)
	for j := range n {
		nodes[j] = buildNode(spec, spec.Start+j, !withKwok)
	}

	var (
		mu   sync.Mutex
		errs []error
		work = make(chan int)
		wg   sync.WaitGroup
	)
	for range min(n, nodeCreateWorkers) {
		wg.Go(func() {
			for j := range work {
				created, err := e.Clientset.CoreV1().Nodes().Create(ctx, &nodes[j], metav1.CreateOptions{})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("create node %s: %w", nodes[j].Name, err))
				} else {
					nodes[j] = *created
				}
				mu.Unlock()
			}
		})
	}
	for j := range n {
		work <- j
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if spec.ResourceSlices {
		for _, nd := range nodes {
			uuids := make([]string, spec.GPUs)
			for i := range uuids {
				uuids[i] = GPUUUID(nd.Name, i)
			}
			if _, err := e.CreateGPUResourceSlice(ctx, nd.Name, NVIDIADRADriver, uuids); err != nil {
				return nil, err
			}
		}
	}
	if !withKwok {
		return nodes, nil
	}

	names := make([]string, n)
	for j := range nodes {
		names[j] = nodes[j].Name
	}
	if err := e.WaitNodesReady(ctx, names...); err != nil {
		return nil, err
	}
	list, err := e.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	byName := make(map[string]corev1.Node, len(list.Items))
	for _, node := range list.Items {
		byName[node.Name] = node
	}
	for j, name := range names {
		nodes[j] = byName[name]
	}
	return nodes, nil
}

// buildNode returns node index i of spec, whose defaults are set. With
// ready it carries the conditions a healthy kubelet posts.
func buildNode(spec NodeSpec, i int, ready bool) corev1.Node {
	name := spec.NodeName(i)
	zoneIdx := i % len(spec.Zones)
	zone := spec.Zones[zoneIdx]
	rack := (i/len(spec.Zones))%spec.RacksPerZone + 1
	product, known := gpuProducts[spec.Product]
	mig := spec.MIGEvery > 0 && i%spec.MIGEvery == spec.MIGEvery-1

	labels := map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelInstanceTypeStable: spec.InstanceType,
		corev1.LabelTopologyRegion:     "region-1",
		corev1.LabelTopologyZone:       zone,
		RackLabel:                      fmt.Sprintf("%s-rack-%d", zone, rack),
		LabelGPUPresent:                "true",
		LabelGPUCount:                  strconv.Itoa(spec.GPUs),
		LabelGPUProduct:                spec.Product,
		LabelMIGCapable:                strconv.FormatBool(known),
		"nvidia.com/cuda.driver.major": "570",
		"nvidia.com/cuda.driver.minor": "124",
		"nvidia.com/cuda.driver.rev":   "06",
	}
	if known {
		labels[LabelGPUMemory] = strconv.Itoa(product.memoryMiB)
		labels[LabelGPUFamily] = product.family
	}

	wholeGPUs := spec.GPUs
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(24*spec.GPUs), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(int64(spec.GPUs)*256<<30, resource.BinarySI),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("7499362032Ki"),
		"hugepages-1Gi":                 resource.MustParse("0"),
		"hugepages-2Mi":                 resource.MustParse("0"),
	}
	if mig {
		split := max(1, spec.GPUs/2)
		wholeGPUs = spec.GPUs - split
		migName := corev1.ResourceName(spec.MIGProfile)
		capacity[migName] = *resource.NewQuantity(int64(2*split), resource.DecimalSI)
		labels[LabelMIGStrategy] = "mixed"
		labels[LabelMIGCapable] = "true"
		labels["nvidia.com/mig.config"] = "custom-half-3g"
		labels["nvidia.com/mig.config.state"] = "success"
		labels[string(migName)+".count"] = strconv.Itoa(2 * split)
	}
	capacity[ResourceGPU] = *resource.NewQuantity(int64(wholeGPUs), resource.DecimalSI)

	// The kubelet reserves some CPU, memory and disk for the system.
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(24*spec.GPUs)*1000-550, resource.DecimalSI)
	mem := allocatable[corev1.ResourceMemory]
	mem.Sub(resource.MustParse("11Gi"))
	allocatable[corev1.ResourceMemory] = mem
	allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("6911330683669")

	for k, v := range spec.Labels {
		labels[k] = v
	}

	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KwokNodeAnnotation:                                       KwokNodeAnnotationValue,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:    podCIDR(i),
			PodCIDRs:   []string{podCIDR(i)},
			ProviderID: fmt.Sprintf("kubemedic-sim:///%s/%s", zone, name),
			Taints:     append([]corev1.Taint(nil), spec.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: nodeIP(i)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               strings.ReplaceAll(uuid.NewString(), "-", ""),
				SystemUUID:              strings.ToUpper(uuid.NewString()),
				BootID:                  uuid.NewString(),
				KernelVersion:           "6.8.0-1021-aws",
				OSImage:                 "Ubuntu 22.04.5 LTS",
				ContainerRuntimeVersion: "containerd://1.7.27",
				KubeletVersion:          KubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	if ready {
		now := metav1.Now()
		node.Status.Phase = corev1.NodeRunning
		node.Status.Conditions = kubeletConditions(now)
	}
	return node
}

// kubeletConditions are the conditions of a healthy node, as the kubelet
// (and kwok's node-initialize stage) post them.
func kubeletConditions(now metav1.Time) []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "RouteController created a route"),
	}
}

// podCIDR returns a distinct /24 for node index i (up to 32768 nodes).
func podCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 128+i/256%128, i%256)
}

// nodeIP returns a distinct address in 172.16.0.0/12 for node index i.
func nodeIP(i int) string {
	return fmt.Sprintf("172.%d.%d.%d", 16+i/(250*256)%16, i/250%256, i%250+2)
}

// WaitNodesReady waits until the named nodes, or every node when no name is
// given, have condition Ready=True. Without a deadline in ctx it gives up
// after two minutes. It fails at once when kwok has exited.
func (e *Cluster) WaitNodesReady(ctx context.Context, names ...string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	var notReady []string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := e.kwokErr(); err != nil {
			return false, err
		}
		list, err := e.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			notReady = []string{"(list nodes: " + err.Error() + ")"}
			return false, nil
		}
		ready := make(map[string]bool, len(list.Items))
		for _, n := range list.Items {
			ready[n.Name] = NodeReady(&n)
		}
		want := names
		if len(want) == 0 {
			want = make([]string, 0, len(list.Items))
			for _, n := range list.Items {
				want = append(want, n.Name)
			}
		}
		notReady = notReady[:0]
		for _, name := range want {
			if !ready[name] {
				notReady = append(notReady, name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		shown := notReady
		if len(shown) > 10 {
			shown = append(slices.Clone(shown[:10]), fmt.Sprintf("... %d more", len(notReady)-10))
		}
		return fmt.Errorf("wait for nodes to be Ready (not ready: %s): %w", strings.Join(shown, ", "), err)
	}
	return nil
}

// NodeReady reports whether node has condition Ready=True.
func NodeReady(node *corev1.Node) bool {
	c := FindNodeCondition(node, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// FindNodeCondition returns the condition of type t of node, or nil.
func FindNodeCondition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// SetNodeCondition sets one condition of a node the way node-problem-detector
// does: a strategic-merge patch of the status subresource with only that
// condition, merged into the list by type, so the kubelet's (kwok's) and
// other detectors' conditions stay. LastHeartbeatTime is now unless set in
// cond; LastTransitionTime is now when the condition is new or its status
// changes and is kept otherwise, unless set in cond (to backdate it).
func (e *Cluster) SetNodeCondition(ctx context.Context, node string, cond corev1.NodeCondition) error {
	if cond.Type == "" || cond.Status == "" {
		return fmt.Errorf("set condition on node %s: type and status are required", node)
	}
	now := metav1.NewTime(time.Now())
	if cond.LastHeartbeatTime.IsZero() {
		cond.LastHeartbeatTime = now
	}
	if cond.LastTransitionTime.IsZero() {
		current, err := e.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("set condition %s on node %s: %w", cond.Type, node, err)
		}
		if old := FindNodeCondition(current, cond.Type); old != nil && old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		} else {
			cond.LastTransitionTime = now
		}
	}
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []corev1.NodeCondition{cond}},
	})
	if err != nil {
		return fmt.Errorf("set condition %s on node %s: %w", cond.Type, node, err)
	}
	if _, err := e.Clientset.CoreV1().Nodes().PatchStatus(ctx, node, patch); err != nil {
		return fmt.Errorf("set condition %s on node %s: %w", cond.Type, node, err)
	}
	return nil
}

// ClearNodeCondition sets the condition condType of a node to False with the
// given reason and message, as node-problem-detector does when a problem
// goes away.
func (e *Cluster) ClearNodeCondition(ctx context.Context, node, condType, reason, message string) error {
	return e.SetNodeCondition(ctx, node, corev1.NodeCondition{
		Type:    corev1.NodeConditionType(condType),
		Status:  corev1.ConditionFalse,
		Reason:  reason,
		Message: message,
	})
}
