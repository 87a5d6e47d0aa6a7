package devicetaint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

const (
	// TaintKey is the key of the taint a rule puts on a device.
	TaintKey = "kubemedic.io/unhealthy"

	// LabelNode, LabelGPUUUID and LabelManagedBy label every rule with the
	// node, the GPU (canonical UUID, see CanonicalUUID) and its manager.
	LabelNode      = "kubemedic.io/node"
	LabelGPUUUID   = "kubemedic.io/gpu-uuid"
	LabelManagedBy = "kubemedic.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "kubemedic"
	// AnnotationOperation names the NodeOperation that applied the rule.
	AnnotationOperation = "kubemedic.io/operation"
	// AnnotationNode names the node whole: LabelNode holds at most 63
	// characters of a name that may have 253.
	AnnotationNode = "kubemedic.io/node"

	// UUIDAttribute is the name of the device attribute holding the GPU
	// UUID, without its domain.
	UUIDAttribute = "uuid"

	// labelValueMax is the longest label value, which is also the limit of
	// a device taint's value.
	labelValueMax = 63
	// nameMax is the longest DNS-1123 subdomain, the limit of a rule's name.
	nameMax = 253
	// uuidPrefix is what NVML puts in front of a GPU's UUID.
	uuidPrefix = "gpu-"
)

// GroupVersion is the DeviceTaintRule API that Rule, Apply and Served use:
// Kubernetes 1.36 serves DeviceTaintRule as v1beta2 (and v1alpha3), not v1.
var GroupVersion = resourcev1beta2.SchemeGroupVersion

// Device is one device in a ResourceSlice. UUID is its GPU's, as NVML
// prints it, from its uuid attribute ("" when it has none); it is not part
// of the device's identity.
type Device struct {
	Driver, Pool, Name string
	UUID               string
}

func (d Device) String() string { return d.Driver + "/" + d.Pool + "/" + d.Name }

// Same reports whether d and o are the same device: driver, pool and name.
func (d Device) Same(o Device) bool {
	return d.Driver == o.Driver && d.Pool == o.Pool && d.Name == o.Name
}

// Find returns the device on node whose "uuid" attribute (bare or with any
// domain, e.g. "gpu.nvidia.com/uuid"; a string) equals uuid, ignoring case
// and a "GPU-" prefix on either side. A slice is on the node when its
// spec.nodeName is node, or, with per-device node selection, a device is
// when its own nodeName is. Of each pool only the slices of its newest
// generation count, as for the scheduler. No match, or more than one, is
// an error.
func Find(slices []resourcev1.ResourceSlice, node, uuid string) (Device, error) {
	if normalizeUUID(uuid) == "" {
		return Device{}, fmt.Errorf("find GPU on node %s: empty UUID %q", node, uuid)
	}
	found, looked := findAll(slices, node, uuid)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Device{}, fmt.Errorf("no device with %s %s on node %s (looked at %d of %d ResourceSlices)",
			UUIDAttribute, uuid, node, looked, len(slices))
	default:
		return Device{}, fmt.Errorf("%d devices with %s %s on node %s (looked at %d of %d ResourceSlices): %s",
			len(found), UUIDAttribute, uuid, node, looked, len(slices), deviceNames(found))
	}
}

// deviceNames lists devices for an error: "driver/pool/name, ...".
func deviceNames(devices []Device) string {
	names := make([]string, len(devices))
	for i, d := range devices {
		names[i] = d.String()
	}
	return strings.Join(names, ", ")
}

// findAll returns the devices on node whose uuid attribute is uuid (see
// Find), and how many slices it looked at.
func findAll(slices []resourcev1.ResourceSlice, node, uuid string) (found []Device, looked int) {
	want := normalizeUUID(uuid)
	return findWhere(slices, node, func(dev *resourcev1.Device) bool { return want != "" && deviceUUID(dev) == want })
}

// findWhere returns the devices on node (see Find) for which match holds,
// in the newest generation of each pool, and how many slices it looked at.
func findWhere(slices []resourcev1.ResourceSlice, node string, match func(*resourcev1.Device) bool) (found []Device, looked int) {
	newest := map[[2]string]int64{} // (driver, pool) -> newest generation
	for i := range slices {
		s := &slices[i].Spec
		k := [2]string{s.Driver, s.Pool.Name}
		if g, ok := newest[k]; !ok || s.Pool.Generation > g {
			newest[k] = s.Pool.Generation
		}
	}
	for i := range slices {
		s := &slices[i].Spec
		if s.Pool.Generation != newest[[2]string{s.Driver, s.Pool.Name}] {
			continue
		}
		sliceOnNode := ptr.Deref(s.NodeName, "") == node
		perDevice := ptr.Deref(s.PerDeviceNodeSelection, false)
		if !sliceOnNode && !perDevice {
			continue
		}
		looked++
		for j := range s.Devices {
			dev := &s.Devices[j]
			if !sliceOnNode && ptr.Deref(dev.NodeName, "") != node {
				continue
			}
			if match(dev) {
				d := Device{Driver: s.Driver, Pool: s.Pool.Name, Name: dev.Name}
				if u := deviceUUID(dev); u != "" {
					d.UUID = CanonicalUUID(u)
				}
				found = append(found, d)
			}
		}
	}
	return found, looked
}

// BusAttributes are the device attributes, without their domain, that
// hold a GPU's PCI bus ID: the NVIDIA DRA driver's pcieBusID, and
// pciBusID, the name Kubernetes' standard attribute
// resource.kubernetes.io/pciBusID has.
var BusAttributes = []string{"pcieBusID", "pciBusID"}

// FindByBus returns the device on node whose PCI bus ID attribute (see
// BusAttributes; compared after gpuwire.NormalizeBus, so
// "00000000:3B:00.0" is "0000:3b:00.0") is bus, with the GPU UUID its uuid
// attribute carries: the xid check names a GPU by bus ID only, and a rule
// is named and checked by UUID. No match, more than one, or a match
// without a uuid attribute is an error.
func FindByBus(slices []resourcev1.ResourceSlice, node, bus string) (Device, error) {
	want := gpuwire.NormalizeBus(bus)
	if want == "" {
		return Device{}, fmt.Errorf("find GPU on node %s: %q is not a PCI bus ID", node, bus)
	}
	found, looked := findWhere(slices, node, func(dev *resourcev1.Device) bool { return deviceBus(dev) == want })
	switch {
	case len(found) == 0:
		return Device{}, fmt.Errorf("no device with a %s attribute %s on node %s (looked at %d of %d ResourceSlices)",
			strings.Join(BusAttributes, " or "), bus, node, looked, len(slices))
	case len(found) > 1:
		return Device{}, fmt.Errorf("%d devices with PCI bus ID %s on node %s: %s", len(found), bus, node, deviceNames(found))
	case found[0].UUID == "":
		return Device{}, fmt.Errorf("device %s (PCI bus ID %s on node %s) has no %s attribute to name its GPU by", found[0], bus, node, UUIDAttribute)
	}
	return found[0], nil
}

// deviceBus returns dev's PCI bus ID, normalized, or "" when it has none.
func deviceBus(dev *resourcev1.Device) string {
	return stringAttribute(dev, BusAttributes, func(v string) string { return gpuwire.NormalizeBus(strings.TrimSpace(v)) })
}

// stringAttribute returns the first non-empty normalized value of dev's
// string attributes named one of names, bare or with any domain
// ("gpu.nvidia.com/uuid"), or "" when it has none.
func stringAttribute(dev *resourcev1.Device, names []string, normalize func(string) string) string {
	for name, attr := range dev.Attributes {
		n := string(name)
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			n = n[i+1:]
		}
		if slices.Contains(names, n) && attr.StringValue != nil {
			if v := normalize(*attr.StringValue); v != "" {
				return v
			}
		}
	}
	return ""
}

// deviceUUID returns the normalized string value of dev's uuid attribute,
// or "" when it has none.
func deviceUUID(dev *resourcev1.Device) string {
	return stringAttribute(dev, []string{UUIDAttribute}, normalizeUUID)
}

// normalizeUUID lower-cases a GPU UUID and strips the "GPU-" prefix.
func normalizeUUID(uuid string) string {
	u := strings.ToLower(strings.TrimSpace(uuid))
	return strings.TrimPrefix(u, uuidPrefix)
}

// CanonicalUUID returns uuid as NVML prints it: "GPU-" and the lower-case
// rest, whatever the case and prefix of the input.
func CanonicalUUID(uuid string) string { return "GPU-" + normalizeUUID(uuid) }

// RuleName returns the name of the rule for (node, uuid): a DNS-1123
// subdomain of at most 253 characters, the same for any case or prefix of
// the UUID. It ends with a hash of both, so that names stay distinct when
// long node names are cut.
func RuleName(node, uuid string) string {
	u := normalizeUUID(uuid)
	sum := sha256.Sum256([]byte(node + "\x00" + u))
	hash := hex.EncodeToString(sum[:])[:10]
	prefix := "kubemedic-" + dnsPart(node) + "-" + dnsPart(u)
	if limit := nameMax - len(hash) - 1; len(prefix) > limit {
		prefix = strings.TrimRight(prefix[:limit], "-")
	}
	return prefix + "-" + hash
}

// dnsPart maps s onto lower-case letters, digits and '-', with every other
// character (dots included, so that no empty DNS label can appear) a '-'.
func dnsPart(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// LabelValue turns s into a valid label value (and device taint value): at
// most 63 characters of letters, digits, '-', '_' and '.', beginning and
// ending with a letter or digit; every run of other characters becomes one
// '-'. It may return "", which is valid.
func LabelValue(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			if !dash {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		b.WriteRune(c)
		dash = false
	}
	v := b.String()
	trim := func(v string) string { return strings.Trim(v, "-_.") }
	v = trim(v)
	if len(v) > labelValueMax {
		v = trim(v[:labelValueMax])
	}
	return v
}

// Rule builds the DeviceTaintRule that takes device d of node out of
// scheduling: a NoSchedule taint TaintKey=reason (made a valid label value,
// see LabelValue) on exactly that driver, pool and device, labelled with
// the node, the GPU and kubemedic, and annotated with the operation.
func Rule(d Device, node, uuid, opName, reason string) *resourcev1beta2.DeviceTaintRule {
	return &resourcev1beta2.DeviceTaintRule{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "DeviceTaintRule"},
		ObjectMeta: metav1.ObjectMeta{
			Name: RuleName(node, uuid),
			Labels: map[string]string{
				LabelNode:      LabelValue(node),
				LabelGPUUUID:   LabelValue(CanonicalUUID(uuid)),
				LabelManagedBy: ManagedBy,
			},
			Annotations: map[string]string{AnnotationOperation: opName, AnnotationNode: node},
		},
		Spec: resourcev1beta2.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1beta2.DeviceTaintSelector{
				Driver: ptr.To(d.Driver),
				Pool:   ptr.To(d.Pool),
				Device: ptr.To(d.Name),
			},
			Taint: resourcev1beta2.DeviceTaint{
				Key:    TaintKey,
				Value:  LabelValue(reason),
				Effect: resourcev1beta2.DeviceTaintEffectNoSchedule,
			},
		},
	}
}

// Served reports whether the API server serves DeviceTaintRule in
// GroupVersion. A group version it does not serve is (false, nil); any
// other discovery error is returned, never read as "not served".
func Served(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Kind == "DeviceTaintRule" && !strings.Contains(r.Name, "/") {
			return true, nil
		}
	}
	return false, nil
}

// Apply creates r, or updates the rule of the same name when its spec,
// labels or annotations differ from r's; a rule that is already as r is
// left alone. The taint's timeAdded, which the API server sets, is kept.
//
// The existing rule is read through reader, which must not be a cache: a
// cached client would start an informer for DeviceTaintRules, which the
// remediator may not list or watch, and wait for it for ever.
func Apply(ctx context.Context, c client.Client, reader client.Reader, r *resourcev1beta2.DeviceTaintRule) error {
	err := c.Create(ctx, r.DeepCopy())
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create DeviceTaintRule %s: %w", r.Name, err)
		}
		return nil
	}
	var cur resourcev1beta2.DeviceTaintRule
	if err := reader.Get(ctx, client.ObjectKey{Name: r.Name}, &cur); err != nil {
		return fmt.Errorf("get DeviceTaintRule %s: %w", r.Name, err)
	}
	want := cur.DeepCopy()
	want.Spec = *r.Spec.DeepCopy()
	want.Spec.Taint.TimeAdded = cur.Spec.Taint.TimeAdded
	for k, v := range r.Labels {
		metav1.SetMetaDataLabel(&want.ObjectMeta, k, v)
	}
	for k, v := range r.Annotations {
		metav1.SetMetaDataAnnotation(&want.ObjectMeta, k, v)
	}
	if equality.Semantic.DeepEqual(want.Spec, cur.Spec) &&
		equality.Semantic.DeepEqual(want.Labels, cur.Labels) &&
		equality.Semantic.DeepEqual(want.Annotations, cur.Annotations) {
		return nil
	}
	if err := c.Update(ctx, want); err != nil {
		return fmt.Errorf("update DeviceTaintRule %s: %w", r.Name, err)
	}
	return nil
}

// AnnotationPermanent on a rule says it excludes the GPU for good (the
// per-GPU attempt cap): a later repair does not remove it; a human does.
const AnnotationPermanent = "kubemedic.io/exclusion-permanent"

// Remove deletes the rule of (node, uuid) unless it is permanent
// (AnnotationPermanent); one that does not exist is fine. The rule is read
// through reader (not a cache, see Apply) and deleted with its
// resourceVersion as a precondition, so a rule made permanent meanwhile is
// not deleted. removed is false when a permanent rule was kept.
func Remove(ctx context.Context, c client.Client, reader client.Reader, node, uuid string) (removed bool, err error) {
	var cur resourcev1beta2.DeviceTaintRule
	if err := reader.Get(ctx, client.ObjectKey{Name: RuleName(node, uuid)}, &cur); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get DeviceTaintRule %s: %w", RuleName(node, uuid), err)
	}
	if cur.Annotations[AnnotationPermanent] != "" {
		return false, nil
	}
	rv := cur.ResourceVersion
	if err := c.Delete(ctx, &cur, client.Preconditions{ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete DeviceTaintRule %s: %w", cur.Name, err)
	}
	return true, nil
}

// Verdict is what Check finds of a rule against the node's devices now.
type Verdict int

const (
	// Keep: the rule selects its GPU, or selects no device at all.
	Keep Verdict = iota
	// Move: the GPU is another device now (the driver numbered the node's
	// devices again, after a reboot); the rule must select To.
	Move
	// Release: the rule selects another GPU now, or its node has been gone
	// for NodeGoneGrace; it must be deleted, or it keeps a healthy GPU from
	// being scheduled.
	Release
	// Unknown: the node's devices cannot tell (not published, a pool
	// published in part, a device without a uuid, two devices with the
	// GPU's UUID), or its node is gone for less than NodeGoneGrace; the
	// rule stays as it is.
	Unknown
)

// Verdicts are all the verdicts, in order.
var Verdicts = []Verdict{Keep, Move, Release, Unknown}

func (v Verdict) String() string {
	return [...]string{"Keep", "Move", "Release", "Unknown"}[v]
}

// Checked is Check's answer: the verdict, the device to move the rule to
// (Move), and why, in words for an Event. MarkGone asks to record on the
// rule (AnnotationNodeGoneSince) that its node was first seen gone now;
// ClearGone to remove that record, the node being back.
type Checked struct {
	Verdict   Verdict
	To        Device
	Why       string
	MarkGone  bool
	ClearGone bool
}

// AnnotationNodeGoneSince on a rule records when its node was first seen
// gone (RFC 3339).
const AnnotationNodeGoneSince = "kubemedic.io/node-gone-since"

// NodeGoneGrace is how long a rule outlives its node. A Node object
// deleted is not the GPU gone: the machine may re-register under its name
// (kubectl delete node, a node lifecycle controller), and then the rule,
// checked by UUID, is its GPU's only exclusion left (the GPU history was
// on the Node). A node gone longer than this is not coming back.
const NodeGoneGrace = 7 * 24 * time.Hour

// Check compares a kubemedic rule with the devices its node publishes now.
// A rule selects a device by driver, pool and name, which a driver may give
// another GPU after a reboot, or a new GPU in the same slot; the rule's
// GPU is its LabelGPUUUID label. nodeGone says the node does not exist:
// the rule stays for NodeGoneGrace (see there), then is released. Check
// never releases on missing evidence: a node whose driver has published
// no ResourceSlice (yet), or not all the slices of the rule's pool, is
// Unknown.
func Check(rule *resourcev1beta2.DeviceTaintRule, slices []resourcev1.ResourceSlice, nodeGone bool, now time.Time) Checked {
	node, exact := NodeOf(rule)
	uuid := rule.Labels[LabelGPUUUID]
	if !exact {
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("rule %s has no %s annotation, and its %s label %q may be a cut node name: left as it is", rule.Name, AnnotationNode, LabelNode, node)}
	}
	goneSince, marked := time.Time{}, false
	if v := rule.Annotations[AnnotationNodeGoneSince]; v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			goneSince, marked = t, true
		}
	}
	if nodeGone {
		switch {
		case !marked:
			return Checked{Verdict: Unknown, MarkGone: true, Why: fmt.Sprintf("node %s does not exist: rule %s stays %s in case the machine comes back under the name", node, rule.Name, NodeGoneGrace)}
		case now.Sub(goneSince) >= NodeGoneGrace:
			return Checked{Verdict: Release, Why: fmt.Sprintf("node %s has been gone since %s, more than %s", node, goneSince.UTC().Format(time.RFC3339), NodeGoneGrace)}
		}
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("node %s has been gone since %s; rule %s stays until %s", node, goneSince.UTC().Format(time.RFC3339), rule.Name, goneSince.Add(NodeGoneGrace).UTC().Format(time.RFC3339))}
	}
	c := check(rule, slices, node, uuid)
	c.ClearGone = rule.Annotations[AnnotationNodeGoneSince] != ""
	return c
}

// check is Check for a rule whose node exists.
func check(rule *resourcev1beta2.DeviceTaintRule, slices []resourcev1.ResourceSlice, node, uuid string) Checked {
	sel := rule.Spec.DeviceSelector
	if uuid == "" || sel == nil || sel.Driver == nil || sel.Pool == nil || sel.Device == nil {
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("rule %s names no GPU UUID or selects no single device: not kubemedic's form", rule.Name)}
	}
	was := Device{Driver: *sel.Driver, Pool: *sel.Pool, Name: *sel.Device}
	published := 0
	for i := range slices {
		if slices[i].Spec.Driver == was.Driver {
			published++
		}
	}
	if published == 0 {
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("driver %s publishes no ResourceSlice on node %s (not yet, after a reboot?): rule %s stays", was.Driver, node, rule.Name)}
	}
	found, _ := findAll(slices, node, uuid)
	switch {
	case len(found) == 1 && found[0].Same(was):
		return Checked{Verdict: Keep, Why: fmt.Sprintf("GPU %s is still device %s", uuid, was)}
	case len(found) == 1:
		return Checked{Verdict: Move, To: found[0], Why: fmt.Sprintf("GPU %s is device %s now, was %s", uuid, found[0], was)}
	case len(found) > 1:
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("%d devices on node %s claim GPU %s: rule %s stays", len(found), node, uuid, rule.Name)}
	}
	// The GPU is not listed on the node. Unless the rule's pool is
	// published whole, it may be in a slice not there yet.
	if have, want := poolSlices(slices, was); have < want {
		return Checked{Verdict: Unknown, Why: fmt.Sprintf("GPU %s is not listed on node %s, but pool %s/%s is published in %d of its %d ResourceSlices: rule %s stays", uuid, node, was.Driver, was.Pool, have, want, rule.Name)}
	}
	named, _ := findWhere(slices, node, func(d *resourcev1.Device) bool { return d.Name == was.Name })
	for _, other := range named {
		if !other.Same(was) {
			continue
		}
		if other.UUID == "" {
			return Checked{Verdict: Unknown, Why: fmt.Sprintf("GPU %s is not listed on node %s, and device %s has no %s attribute to tell which GPU it is", uuid, node, was, UUIDAttribute)}
		}
		return Checked{Verdict: Release, Why: fmt.Sprintf("device %s is GPU %s now, not %s, which node %s no longer lists (replaced, or not published after a reboot)", was, other.UUID, uuid, node)}
	}
	return Checked{Verdict: Keep, Why: fmt.Sprintf("GPU %s is not listed on node %s, and the rule selects no device now", uuid, node)}
}

// poolSlices returns how many slices of d's pool's newest generation are
// in slices, and how many that generation has (its resourceSliceCount).
func poolSlices(slices []resourcev1.ResourceSlice, d Device) (have, want int) {
	var newest int64 = -1
	for i := range slices {
		s := &slices[i].Spec
		if s.Driver == d.Driver && s.Pool.Name == d.Pool && s.Pool.Generation > newest {
			newest, want = s.Pool.Generation, int(s.Pool.ResourceSliceCount)
		}
	}
	for i := range slices {
		s := &slices[i].Spec
		if s.Driver == d.Driver && s.Pool.Name == d.Pool && s.Pool.Generation == newest {
			have++
		}
	}
	return have, want
}

// NodeOf returns the node a kubemedic rule is for: its AnnotationNode, or,
// on a rule made before that annotation, its LabelNode. exact is false
// when the name comes from a label of the longest length, which may be a
// cut name.
func NodeOf(rule *resourcev1beta2.DeviceTaintRule) (node string, exact bool) {
	if n := rule.Annotations[AnnotationNode]; n != "" {
		return n, true
	}
	n := rule.Labels[LabelNode]
	return n, len(n) < labelValueMax
}

// Moved returns rule selecting device to instead, labels and annotations
// kept.
func Moved(rule *resourcev1beta2.DeviceTaintRule, to Device) *resourcev1beta2.DeviceTaintRule {
	r := rule.DeepCopy()
	r.Spec.DeviceSelector = &resourcev1beta2.DeviceTaintSelector{Driver: ptr.To(to.Driver), Pool: ptr.To(to.Pool), Device: ptr.To(to.Name)}
	return r
}
