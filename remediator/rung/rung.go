package rung

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
)

// The other projects' kinds, at the versions their pinned modules store.
var (
	MachineGVK       = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"}
	BareMetalHostGVK = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}
)

// Cluster API's annotations on a Node that name its Machine and cluster.
const (
	annotationCAPIMachine   = "cluster.x-k8s.io/machine"
	annotationCAPINamespace = "cluster.x-k8s.io/cluster-namespace"
	annotationCAPICluster   = "cluster.x-k8s.io/cluster-name"
)

// Provider reads and asks the machine providers.
type Provider struct {
	// Client writes (patches); Reader reads without a cache.
	Client client.Client
	Reader client.Reader
	// Namespace holds the BMC credential Secrets.
	Namespace string
	// Reset is redfish.Reset and Inspect redfish.Inspect; tests may point
	// them elsewhere.
	Reset   func(context.Context, redfish.Request) (redfish.Result, error)
	Inspect func(context.Context, redfish.Request) (redfish.SystemState, error)
	// Clock stamps a BMC reset's intent; nil is the real clock.
	Clock clock.PassiveClock
	// Timeout bounds each Redfish call; 0 is redfish.DefaultTimeout.
	Timeout time.Duration
}

// PermanentError is a request the provider refused for good.
type PermanentError struct{ Msg string }

func (e *PermanentError) Error() string { return e.Msg }

// UnrecordedError: the provider was asked and answered, but the marker
// that records the answer could not be written. The intent written before
// the ask remains, so the next pass judges from evidence (plan.JudgeReset)
// before it asks again.
type UnrecordedError struct{ Err error }

func (e *UnrecordedError) Error() string {
	return "asked, but its answer is not recorded (the next pass judges from the intent before asking again): " + e.Err.Error()
}

func (e *UnrecordedError) Unwrap() error { return e.Err }

// Asked reports whether Request's error still means the provider was asked.
func Asked(err error) bool {
	var u *UnrecordedError
	return errors.As(err, &u)
}

// IsPermanent reports whether err is a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Observe finds the node's machine for a machine template. Not finding it
// is an observation (Missing), not an error; errors are failed reads to
// retry.
func (p *Provider) Observe(ctx context.Context, tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation, node *corev1.Node) (plan.MachineObservation, error) {
	switch tpl.Spec.MachineKind() {
	case v1alpha1.MachineClusterAPI:
		return p.observeObject(ctx, op, node, MachineGVK, p.findMachine)
	case v1alpha1.MachineMetal3:
		return p.observeObject(ctx, op, node, BareMetalHostGVK, p.findHost)
	case v1alpha1.MachineRedfish:
		if node == nil {
			return plan.MachineObservation{Missing: "node " + op.Spec.NodeName + " does not exist, so its BMC address cannot be found"}, nil
		}
		return p.observeBMC(ctx, tpl, op, node)
	}
	return plan.MachineObservation{}, fmt.Errorf("template %s asks no machine provider", tpl.Name)
}

// Request asks the provider, once (see the package doc).
func (p *Provider) Request(ctx context.Context, tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation, node *corev1.Node) error {
	switch tpl.Spec.MachineKind() {
	case v1alpha1.MachineClusterAPI:
		obj, _, _, err := p.findMachine(ctx, node, op)
		if err != nil || obj == nil {
			return errors.Join(err, fmt.Errorf("the Machine of node %s is gone since it was found", op.Spec.NodeName))
		}
		if err := p.annotate(ctx, obj, map[string]any{plan.AnnotationRemediateMachine: "", v1alpha1.AnnotationMachineRequestedBy: v1alpha1.MachineRequestMarker(op)}); err != nil {
			return err
		}
		// The Node too: the MachineHealthCheck may delete the Machine
		// before a pass whose status write failed is retried, and the
		// Node (until it goes as well) still says it was asked. Best
		// effort: the Machine was asked, and failing the pass here would
		// only put the status write (the request's record) at risk.
		if err := p.markNode(ctx, node, op); err != nil {
			log.FromContext(ctx).Error(err, "Asked the Machine, but could not mark the Node as asked", "machine", targetOf(obj))
		}
		return nil
	case v1alpha1.MachineMetal3:
		obj, _, _, err := p.findHost(ctx, node, op)
		if err != nil || obj == nil {
			return errors.Join(err, fmt.Errorf("the BareMetalHost of node %s is gone since it was found", op.Spec.NodeName))
		}
		mode := policies.DefaultMetal3Mode
		if tpl.Spec.Metal3.Mode != "" {
			mode = tpl.Spec.Metal3.Mode
		}
		return p.annotate(ctx, obj, map[string]any{plan.AnnotationMetal3Reboot: fmt.Sprintf(`{"mode":%q}`, mode), v1alpha1.AnnotationMachineRequestedBy: v1alpha1.MachineRequestMarker(op)})
	case v1alpha1.MachineRedfish:
		if node == nil {
			return &PermanentError{Msg: "node " + op.Spec.NodeName + " does not exist"}
		}
		return p.requestBMC(ctx, tpl, op, node)
	}
	return fmt.Errorf("template %s asks no machine provider", tpl.Name)
}

// markNode leaves op's request marker on the node; none is fine.
func (p *Provider) markNode(ctx context.Context, node *corev1.Node, op *v1alpha1.NodeOperation) error {
	if node == nil {
		return nil
	}
	n := &corev1.Node{}
	n.Name = node.Name
	err := p.Client.Patch(ctx, n, mergeAnnotations(map[string]any{v1alpha1.AnnotationMachineRequestedBy: v1alpha1.MachineRequestMarker(op)}))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("mark node %s as asked: %w", node.Name, err)
	}
	return nil
}

// marked reports whether annotations carry op's request marker.
func marked(annotations map[string]string, op *v1alpha1.NodeOperation) bool {
	return annotations[v1alpha1.AnnotationMachineRequestedBy] == v1alpha1.MachineRequestMarker(op)
}

// A finder finds the node's Machine or BareMetalHost. When it finds none,
// missing says why and absent whether that is because none exists (rather
// than a kind not served, or an object that is not the node's).
type finder func(ctx context.Context, node *corev1.Node, op *v1alpha1.NodeOperation) (obj *unstructured.Unstructured, missing string, absent bool, err error)

// observeObject observes a Machine or BareMetalHost: before the request,
// found or Missing; after it, the object asked (by the recorded target)
// or Gone.
func (p *Provider) observeObject(ctx context.Context, op *v1alpha1.NodeOperation, node *corev1.Node, gvk schema.GroupVersionKind, find finder) (plan.MachineObservation, error) {
	if r := op.Status.MachineRequest; r != nil {
		key, ok := parseTarget(r.Target, gvk.Kind)
		if !ok {
			return plan.MachineObservation{Target: r.Target}, nil
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		err := p.Reader.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			return plan.MachineObservation{Target: r.Target, Gone: true}, nil
		case err != nil:
			return plan.MachineObservation{}, fmt.Errorf("get %s: %w", r.Target, err)
		}
		return plan.MachineObservation{Target: r.Target, Requested: true}, nil
	}
	obj, missing, absent, err := find(ctx, node, op)
	if err != nil {
		return plan.MachineObservation{}, err
	}
	// Only a Machine's request also marks the Node (see Request).
	nodeMarked := gvk == MachineGVK && node != nil && marked(node.Annotations, op)
	if obj == nil {
		if nodeMarked && absent {
			// Asked in a pass whose status write failed, and the Machine
			// went before this one: the Node still says so, and the
			// Machine gone is the replacement.
			return plan.MachineObservation{Target: annotatedMachine(node), Requested: true, Gone: true}, nil
		}
		return plan.MachineObservation{Missing: missing}, nil
	}
	return plan.MachineObservation{Target: targetOf(obj), Requested: marked(obj.GetAnnotations(), op) || nodeMarked}, nil
}

// annotatedMachine names the Machine that the node's Cluster API
// annotations name, as targetOf does, or "" when they name none.
func annotatedMachine(node *corev1.Node) string {
	m, ns := node.Annotations[annotationCAPIMachine], node.Annotations[annotationCAPINamespace]
	if m == "" || ns == "" {
		return ""
	}
	return target(MachineGVK.Kind, ns, m)
}

// findMachine finds the node's Machine: by the node's
// cluster.x-k8s.io/machine annotation (with cluster.x-k8s.io/cluster-namespace),
// else the one Machine whose status.nodeRef names the node.
func (p *Provider) findMachine(ctx context.Context, node *corev1.Node, op *v1alpha1.NodeOperation) (*unstructured.Unstructured, string, bool, error) {
	name := op.Spec.NodeName
	if node != nil {
		if m, ns := node.Annotations[annotationCAPIMachine], node.Annotations[annotationCAPINamespace]; m != "" && ns != "" {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(MachineGVK)
			err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: m}, obj)
			switch {
			case err == nil:
				// Whoever can annotate the node (its kubelet) must not get
				// another node's Machine replaced.
				if ref, _, _ := unstructured.NestedString(obj.Object, "status", "nodeRef", "name"); ref != "" && ref != name {
					return nil, fmt.Sprintf("Machine %s/%s, which node %s's %s annotation names, belongs to node %s (its status.nodeRef); kubemedic asks no other node's Machine", ns, m, name, annotationCAPIMachine, ref), false, nil
				}
				return obj, "", false, nil
			case notServed(err):
				return nil, notServedMsg(MachineGVK), false, nil
			case !apierrors.IsNotFound(err):
				return nil, "", false, fmt.Errorf("get Machine %s/%s of node %s: %w", ns, m, name, err)
			}
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := p.Reader.List(ctx, list); err != nil {
		if notServed(err) {
			return nil, notServedMsg(MachineGVK), false, nil
		}
		return nil, "", false, fmt.Errorf("list Machines for node %s: %w", name, err)
	}
	var found []*unstructured.Unstructured
	annotated, clusterNS, cluster := "", "", ""
	if node != nil {
		annotated, clusterNS, cluster = node.Annotations[annotationCAPIMachine], node.Annotations[annotationCAPINamespace], node.Annotations[annotationCAPICluster]
	}
	for i := range list.Items {
		m := &list.Items[i]
		// Where the node names its cluster, a Machine of another cluster
		// (a namesake, or one whose node has the same name) is not its.
		if clusterNS != "" && m.GetNamespace() != clusterNS {
			continue
		}
		if c, _, _ := unstructured.NestedString(m.Object, "spec", "clusterName"); cluster != "" && c != cluster {
			continue
		}
		ref, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if ref == name || (annotated != "" && m.GetName() == annotated && ref == "") {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Sprintf("no Cluster API Machine for node %s: the node has no %s annotation naming one, and no Machine's status.nodeRef names it (%d Machines looked at)", name, annotationCAPIMachine, len(list.Items)), true, nil
	case 1:
		return found[0], "", false, nil
	}
	var names []string
	for _, m := range found {
		names = append(names, m.GetNamespace()+"/"+m.GetName())
	}
	return nil, fmt.Sprintf("%d Cluster API Machines claim node %s (%s); kubemedic asks none of them", len(found), name, strings.Join(names, ", ")), false, nil
}

// findHost finds the node's BareMetalHost: by the node's
// kubemedic.io/baremetalhost annotation (namespace/name), else its
// providerID metal3://namespace/name/... as CAPM3 writes it.
func (p *Provider) findHost(ctx context.Context, node *corev1.Node, op *v1alpha1.NodeOperation) (*unstructured.Unstructured, string, bool, error) {
	if node == nil {
		return nil, "node " + op.Spec.NodeName + " does not exist, so its BareMetalHost cannot be found", false, nil
	}
	ref, from := node.Annotations[v1alpha1.AnnotationBareMetalHost], "annotation "+v1alpha1.AnnotationBareMetalHost
	if ref == "" {
		if rest, ok := strings.CutPrefix(node.Spec.ProviderID, "metal3://"); ok {
			if parts := strings.Split(rest, "/"); len(parts) >= 2 {
				ref, from = parts[0]+"/"+parts[1], "providerID "+node.Spec.ProviderID
			}
		}
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Sprintf("no Metal3 BareMetalHost for node %s: set its annotation %s to namespace/name, or a providerID metal3://namespace/name/... (providerID is %q)", node.Name, v1alpha1.AnnotationBareMetalHost, node.Spec.ProviderID), false, nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(BareMetalHostGVK)
	err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case notServed(err):
		return nil, notServedMsg(BareMetalHostGVK), false, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("BareMetalHost %s/%s of node %s (from its %s) does not exist", ns, name, node.Name, from), true, nil
	case err != nil:
		return nil, "", false, fmt.Errorf("get BareMetalHost %s/%s of node %s: %w", ns, name, node.Name, err)
	}
	if back := obj.GetAnnotations()[v1alpha1.AnnotationBareMetalHostNode]; !strings.HasPrefix(from, "providerID") && back != node.Name {
		// The node's annotation alone, which its kubelet can write, never
		// chooses a host; the providerID cannot be changed once set.
		return nil, fmt.Sprintf("BareMetalHost %s/%s, named by node %s's annotation %s, does not name the node back (its annotation %s is %q): set it, or use the providerID metal3://%s/%s/...",
			ns, name, node.Name, v1alpha1.AnnotationBareMetalHost, v1alpha1.AnnotationBareMetalHostNode, back, ns, name), false, nil
	}
	return obj, "", false, nil
}

// redfishRequest builds the BMC request: the address from the template,
// the credentials from the Secret. missing says what is not there.
func (p *Provider) redfishRequest(ctx context.Context, tpl *v1alpha1.NodeOperationTemplate, node *corev1.Node) (redfish.Request, string, error) {
	rf := tpl.Spec.Redfish
	addr, err := policies.BMCAddress(rf.Address, node)
	if err != nil {
		return redfish.Request{}, "template " + tpl.Name + ": " + err.Error(), nil
	}
	sec := &corev1.Secret{}
	err = p.Reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: rf.CredentialsSecret}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return redfish.Request{}, fmt.Sprintf("template %s: the BMC credentials Secret %s/%s does not exist", tpl.Name, p.Namespace, rf.CredentialsSecret), nil
	case err != nil:
		return redfish.Request{}, "", fmt.Errorf("get the BMC credentials Secret %s/%s: %w", p.Namespace, rf.CredentialsSecret, err)
	}
	user, pass := string(sec.Data["username"]), string(sec.Data["password"])
	if user == "" || pass == "" {
		return redfish.Request{}, fmt.Sprintf("template %s: the BMC credentials Secret %s/%s needs the keys username and password", tpl.Name, p.Namespace, rf.CredentialsSecret), nil
	}
	return redfish.Request{Endpoint: addr, Username: user, Password: pass, System: rf.System, ResetType: rf.ResetType,
		InsecureSkipVerify: rf.InsecureSkipVerify, Timeout: p.timeout()}, "", nil
}

// redfishTarget names the system asked, without credentials.
func redfishTarget(r redfish.Request) string {
	// An address rendered with a trailing slash (https://bmc/) is the
	// same endpoint to redfish.Reset.
	base := strings.TrimSuffix(r.Endpoint, "/")
	if r.System == "" {
		return base + "/redfish/v1/Systems (its only system)"
	}
	return base + "/redfish/v1/Systems/" + r.System
}

func (p *Provider) annotate(ctx context.Context, obj *unstructured.Unstructured, annotations map[string]any) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := p.Client.Patch(ctx, u, mergeAnnotations(annotations)); err != nil {
		return fmt.Errorf("annotate %s: %w", targetOf(obj), err)
	}
	return nil
}

func mergeAnnotations(a map[string]any) client.Patch {
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": a}})
	return client.RawPatch(types.MergePatchType, data)
}

// targetOf names an object as the status records it: "Kind ns/name".
func targetOf(obj *unstructured.Unstructured) string {
	return target(obj.GetKind(), obj.GetNamespace(), obj.GetName())
}

// target is targetOf's form; parseTarget reads it back.
func target(kind, ns, name string) string { return kind + " " + ns + "/" + name }

// parseTarget reads back targetOf's form.
func parseTarget(target, kind string) (types.NamespacedName, bool) {
	rest, ok := strings.CutPrefix(target, kind+" ")
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}

func notServed(err error) bool {
	return apimeta.IsNoMatchError(err) || errors.Is(err, &apimeta.NoKindMatchError{})
}

func notServedMsg(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("the API server does not serve %s %s: install that provider, or take this step out of the ladder", gvk.GroupVersion(), gvk.Kind)
}
