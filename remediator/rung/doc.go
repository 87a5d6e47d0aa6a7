// Package rung carries out the ladder's last rung, the operations that
// replace or power-cycle a machine instead of running a pod on it: it
// finds the node's Cluster API Machine, Metal3 BareMetalHost or BMC
// (Observe) and asks it once (Request). The decisions (when to ask, what
// counts as success, the timeout) are plan.Advance's; this package only
// reads and writes other projects' objects and the BMC.
//
// Asked once: every request leaves the annotation
// kubemedic.io/machine-requested-by=<operation>/<uid> where the next pass
// reads it (on the Machine and the BareMetalHost in the same patch as the
// request, on the Node right after a Machine was asked or a BMC accepted
// the reset), so a pass whose status write failed records the request
// instead of repeating it. The Node's marker outlives a Machine that the
// MachineHealthCheck deleted before that pass: the request was made, and
// the Machine gone is the replacement.
//
// A BMC reset's answer can be lost after the BMC applied it, so its
// intent is recorded on the Node (kubemedic.io/machine-reset-intent, with
// the node's boot ID and the BMC's power state) and confirmed before the
// POST; a pass that finds the intent without the answer asks again only
// when plan.JudgeReset's evidence shows the first ask never reached the
// machine (bmc.go).
//
// A Machine is the node's only if it is in the cluster the node names
// (its cluster.x-k8s.io/cluster-namespace and cluster-name annotations,
// where set) and its status.nodeRef, once set, names the node: node
// annotations can be written by the node's own kubelet, which must not get
// another machine replaced.
//
// Other projects' objects are read and patched as unstructured objects
// (cluster.x-k8s.io/v1beta2 Machine, metal3.io/v1alpha1 BareMetalHost),
// through the API reader: the remediator runs in clusters without those
// CRDs, and a cache would need them to start.
//
// BMC credentials come from a Secret in the remediator's namespace and go
// only into the Redfish request; errors and observations never carry them.
package rung
