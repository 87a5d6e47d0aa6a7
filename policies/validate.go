package policies

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Validate checks one kubemedic object on its own, after defaulting, and
// returns every problem with its field path. It is pure and covers the
// OpenAPI and CEL rules of the CRDs as well as what they cannot check (RE2
// regexes, IANA time zones). References to other objects are checked by
// ValidateSet.
func Validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *v1alpha1.RemediationPolicy:
		return append(validateMeta(&o.ObjectMeta, false), validateRemediationPolicySpec(&o.Spec, field.NewPath("spec"))...)
	case *v1alpha1.NodeOperationTemplate:
		return append(validateMeta(&o.ObjectMeta, false), validateTemplateSpec(&o.Spec, field.NewPath("spec"))...)
	case *v1alpha1.NodeOperation:
		return append(validateMeta(&o.ObjectMeta, false), validateNodeOperationSpec(&o.Spec, field.NewPath("spec"))...)
	case *v1alpha1.ClusterReclaimPolicy:
		p := field.NewPath("spec")
		errs := append(validateMeta(&o.ObjectMeta, false), validateReclaimRules(&o.Spec.ReclaimRules, p)...)
		errs = append(errs, validateSelector(o.Spec.NamespaceSelector, p.Child("namespaceSelector"))...)
		errs = append(errs, validateSelector(o.Spec.ExemptPodSelector, p.Child("exemptPodSelector"))...)
		for i, ns := range o.Spec.ExemptNamespaces {
			errs = append(errs, validateDNSLabel(ns, p.Child("exemptNamespaces").Index(i))...)
		}
		return append(errs, duplicates(o.Spec.ExemptNamespaces, p.Child("exemptNamespaces"))...)
	case *v1alpha1.ReclaimPolicy:
		p := field.NewPath("spec")
		errs := append(validateMeta(&o.ObjectMeta, true), validateReclaimRules(&o.Spec.ReclaimRules, p)...)
		return append(errs, validateSelector(o.Spec.PodSelector, p.Child("podSelector"))...)
	case *v1alpha1.ValidationPolicy:
		return append(validateMeta(&o.ObjectMeta, false), validateValidationPolicySpec(&o.Spec, field.NewPath("spec"))...)
	}
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("not a kubemedic object: %T", obj))}
}

func validateMeta(m *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	p := field.NewPath("metadata")
	var errs field.ErrorList
	if m.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "every object needs a name"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), m.Name, msg))
		}
	}
	if m.Namespace != "" {
		if !namespaced {
			errs = append(errs, field.Forbidden(p.Child("namespace"), "this kind is cluster-scoped; remove the namespace"))
		} else {
			errs = append(errs, validateDNSLabel(m.Namespace, p.Child("namespace"))...)
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))...)
	return errs
}

func validateRemediationPolicySpec(s *v1alpha1.RemediationPolicySpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, maxLen(s.Description, 1024, p.Child("description"))...)
	errs = append(errs, validateSelector(s.NodeSelector, p.Child("nodeSelector"))...)

	cp := p.Child("conditions")
	switch {
	case len(s.Conditions) == 0:
		errs = append(errs, field.Required(cp, "list at least one node condition, e.g. {type: GPUXidError}"))
	case len(s.Conditions) > 16:
		errs = append(errs, field.TooMany(cp, len(s.Conditions), 16))
	}
	for i := range s.Conditions {
		errs = append(errs, validateConditionMatch(&s.Conditions[i], cp.Index(i))...)
	}

	sp := p.Child("steps")
	switch {
	case len(s.Steps) == 0:
		errs = append(errs, field.Required(sp, "list at least one step, e.g. {name: reset, operation: reset-gpu}"))
	case len(s.Steps) > 10:
		errs = append(errs, field.TooMany(sp, len(s.Steps), 10))
	}
	names := sets.New[string]()
	for i := range s.Steps {
		st := &s.Steps[i]
		ip := sp.Index(i)
		errs = append(errs, validateStep(st, ip)...)
		if names.Has(st.Name) {
			errs = append(errs, field.Duplicate(ip.Child("name"), st.Name))
		}
		names.Insert(st.Name)
		if st.Quarantine && i != len(s.Steps)-1 {
			errs = append(errs, field.Invalid(ip.Child("quarantine"), true, "a quarantine step must be the last step: nothing runs after a quarantine"))
		}
	}
	if s.Diagnostics != nil {
		errs = append(errs, validateDiagnostics(s.Diagnostics, nil, p.Child("diagnostics"))...)
	}
	if s.Validate != nil {
		errs = append(errs, validateValidate(s.Validate, p.Child("validate"))...)
		for i := range s.Steps {
			if st := &s.Steps[i]; st.Validate == nil && st.Operation != "" && !st.Cordon && st.Drain == nil {
				errs = append(errs, field.Invalid(sp.Index(i).Child("cordon"), false, validateNeedsCordon("the policy's validate applies to step "+st.Name)))
			}
		}
	}
	if s.Priority < -1000 || s.Priority > 1000 {
		errs = append(errs, field.Invalid(p.Child("priority"), s.Priority, "must be between -1000 and 1000"))
	}
	return append(errs, validateSafety(&s.Safety, p.Child("safety"))...)
}

func validateConditionMatch(c *v1alpha1.ConditionMatch, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "the node condition type, e.g. GPUXidError"))
	} else {
		for _, msg := range validation.IsQualifiedName(c.Type) {
			errs = append(errs, field.Invalid(p.Child("type"), c.Type, msg))
		}
	}
	switch c.Status {
	case "True", "False", "Unknown":
	default:
		errs = append(errs, field.NotSupported(p.Child("status"), c.Status, []string{"True", "False", "Unknown"}))
	}
	if c.Reason != "" {
		errs = append(errs, maxLen(c.Reason, 256, p.Child("reason"))...)
		if _, err := regexp.Compile("^(?:" + c.Reason + ")$"); err != nil {
			errs = append(errs, field.Invalid(p.Child("reason"), c.Reason, "not a valid RE2 regular expression: "+regexpError(err)))
		}
	}
	return append(errs, nonNegative(c.For, p.Child("for"))...)
}

func validateStep(st *v1alpha1.RemediationStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if st.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "a step name such as reset or reboot"))
	} else {
		errs = append(errs, validateDNSLabel(st.Name, p.Child("name"))...)
	}
	errs = append(errs, validateOperationOrQuarantine(st.Operation, st.Quarantine, p)...)
	if st.Quarantine && st.Drain != nil {
		errs = append(errs, field.Forbidden(p.Child("drain"), "a quarantine step takes no drain: it cordons and taints, and leaves the pods to a human"))
	}
	if st.Drain != nil {
		errs = append(errs, validateDrain(st.Drain, p.Child("drain"))...)
	}
	errs = append(errs, positive(st.Timeout, p.Child("timeout"))...)
	if st.Diagnostics != nil {
		if st.Quarantine {
			errs = append(errs, field.Forbidden(p.Child("diagnostics"), "a quarantine step takes no diagnostics: it changes nothing on the node, so there is no evidence to save first"))
		} else {
			errs = append(errs, validateDiagnostics(st.Diagnostics, st.Timeout, p.Child("diagnostics"))...)
		}
	}
	if st.Validate != nil {
		errs = append(errs, validateStepValidate(&st.StepAction, p)...)
	}
	errs = append(errs, nonNegative(st.HealthyFor, p.Child("healthyFor"))...)
	return append(errs, nonNegative(st.RecoveryTimeout, p.Child("recoveryTimeout"))...)
}

// validateStepValidate checks the active GPU test of a step or a
// NodeOperation: never on a quarantine (the node is handed to a human, and
// nothing repaired it), and only on a cordoned node (the test needs every
// GPU, and a node must not serve before it passes).
func validateStepValidate(a *v1alpha1.StepAction, p *field.Path) field.ErrorList {
	if a.Quarantine {
		return field.ErrorList{field.Forbidden(p.Child("validate"), "a quarantine step takes no validate: nothing was repaired, and a human decides when the node serves again")}
	}
	errs := validateValidate(a.Validate, p.Child("validate"))
	if !a.Cordon && a.Drain == nil {
		errs = append(errs, field.Invalid(p.Child("cordon"), false, validateNeedsCordon("validate is set")))
	}
	return errs
}

// validateNeedsCordon is the detail of a validate on a step that does not
// cordon.
func validateNeedsCordon(why string) string {
	return why + ", so the step must cordon (cordon: true, or a drain): the test pod takes every GPU of the node, and the node must not serve new pods before the test passes"
}

// validateValidate checks a validate spec on its own (that its template
// exists is checked with the set, ValidateSet).
func validateValidate(v *v1alpha1.ValidateSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Operation == "" {
		errs = append(errs, field.Required(p.Child("operation"), "the NodeOperationTemplate that tests the GPUs, e.g. validate-dcgm-diag"))
	} else {
		errs = append(errs, validateDNSSubdomain(v.Operation, p.Child("operation"))...)
	}
	return append(errs, positive(v.Timeout, p.Child("timeout"))...)
}

// validateValidationPolicySpec checks a ValidationPolicy: its test, and
// a background section that says how often and with what budget.
func validateValidationPolicySpec(s *v1alpha1.ValidationPolicySpec, p *field.Path) field.ErrorList {
	errs := validateSelector(s.NodeSelector, p.Child("nodeSelector"))
	errs = append(errs, validateValidate(&s.Validate, p.Child("validate"))...)
	if s.Join != nil && s.Join.TaintNewNodes && s.NodeSelector == nil {
		errs = append(errs, field.Required(p.Child("nodeSelector"), "join.taintNewNodes needs a nodeSelector: without one, every new node (CPU and system nodes too) would be tainted until a GPU test passes"))
	}
	b := s.Background
	if b == nil {
		if s.Join == nil {
			errs = append(errs, field.Required(p.Child("background"), "a policy with neither join nor background tests only nodes that register with the taint "+v1alpha1.TaintUnvalidated+"; say join: {} to mean that, or add a background section"))
		}
		return errs
	}
	bp := p.Child("background")
	if b.Every.Duration <= 0 {
		errs = append(errs, field.Required(bp.Child("every"), "how often each node is tested, e.g. 168h"))
	}
	if b.MaxConcurrent < 1 {
		errs = append(errs, field.Required(bp.Child("maxConcurrent"), "a background section needs a budget: how many nodes may be tested at once (at least 1), so that tests never hold a fleet's GPUs"))
	}
	if b.PriorityClassName != "" {
		errs = append(errs, validateDNSSubdomain(b.PriorityClassName, bp.Child("priorityClassName"))...)
	}
	errs = append(errs, positive(b.WaitFor, bp.Child("waitFor"))...)
	return append(errs, positive(b.RetryAfter, bp.Child("retryAfter"))...)
}

var diagnosticsWhen = []string{string(v1alpha1.DiagnosticsBeforeDrain), string(v1alpha1.DiagnosticsAfterDrain)}

// validateDiagnostics checks a capture; stepTimeout, when set, bounds its
// timeout (the template's timeouts are checked with the set, ValidateSet).
func validateDiagnostics(d *v1alpha1.DiagnosticsSpec, stepTimeout *metav1.Duration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.Operation == "" {
		errs = append(errs, field.Required(p.Child("operation"), "the NodeOperationTemplate that captures, e.g. collect-gpu-diagnostics"))
	} else {
		errs = append(errs, validateDNSSubdomain(d.Operation, p.Child("operation"))...)
	}
	errs = append(errs, positive(d.Timeout, p.Child("timeout"))...)
	if d.When != "" {
		errs = append(errs, validateEnum(string(d.When), diagnosticsWhen, p.Child("when"))...)
	}
	if d.Timeout != nil && stepTimeout != nil && d.Timeout.Duration > stepTimeout.Duration {
		errs = append(errs, field.Invalid(p.Child("timeout"), d.Timeout.Duration.String(),
			fmt.Sprintf("longer than the step's timeout (%s): a capture must not hold a repair longer than the repair may take", stepTimeout.Duration)))
	}
	return errs
}

// validateOperationOrQuarantine checks that a step or a NodeOperation does
// exactly one thing: run the named template, or quarantine.
func validateOperationOrQuarantine(operation string, quarantine bool, p *field.Path) field.ErrorList {
	switch {
	case operation == "" && !quarantine:
		return field.ErrorList{field.Required(p.Child("operation"), "set operation (a NodeOperationTemplate name) or quarantine: true")}
	case operation != "" && quarantine:
		return field.ErrorList{field.Invalid(p.Child("quarantine"), true, "set exactly one of operation or quarantine: true")}
	case operation != "":
		return validateDNSSubdomain(operation, p.Child("operation"))
	}
	return nil
}

var drainModes = []string{string(v1alpha1.DrainEvict), string(v1alpha1.DrainDeleteAfterTimeout), string(v1alpha1.DrainSkip)}

func validateDrain(d *v1alpha1.DrainSpec, p *field.Path) field.ErrorList {
	errs := positive(d.Timeout, p.Child("timeout"))
	errs = append(errs, validateEnum(string(d.Mode), drainModes, p.Child("mode"))...)
	if len(d.Rules) > 32 {
		errs = append(errs, field.TooMany(p.Child("rules"), len(d.Rules), 32))
	}
	for i, r := range d.Rules {
		rp := p.Child("rules").Index(i)
		if len(r.Namespaces) == 0 && r.PodSelector == nil {
			errs = append(errs, field.Required(rp, "a drain rule needs namespaces or a podSelector"))
		}
		for j, ns := range r.Namespaces {
			errs = append(errs, validateDNSLabel(ns, rp.Child("namespaces").Index(j))...)
		}
		errs = append(errs, duplicates(r.Namespaces, rp.Child("namespaces"))...)
		errs = append(errs, validateSelector(r.PodSelector, rp.Child("podSelector"))...)
		if r.Mode == "" {
			errs = append(errs, field.Required(rp.Child("mode"), "one of "+strings.Join(drainModes, ", ")))
		} else {
			errs = append(errs, validateEnum(string(r.Mode), drainModes, rp.Child("mode"))...)
		}
	}
	return errs
}

func validateSafety(s *v1alpha1.Safety, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MaxUnhealthy != nil {
		errs = append(errs, validateCountOrPercent(*s.MaxUnhealthy, 0, p.Child("maxUnhealthy"))...)
	}
	errs = append(errs, nonNegative(s.BreakerCooldown, p.Child("breakerCooldown"))...)
	if s.MaxConcurrent != nil {
		errs = append(errs, validateCountOrPercent(*s.MaxConcurrent, 1, p.Child("maxConcurrent"))...)
	}
	if fd := s.FailureDomain; fd != nil {
		fp := p.Child("failureDomain")
		if fd.TopologyKey == "" {
			errs = append(errs, field.Required(fp.Child("topologyKey"), "a node label such as topology.kubernetes.io/zone"))
		} else {
			for _, msg := range validation.IsQualifiedName(fd.TopologyKey) {
				errs = append(errs, field.Invalid(fp.Child("topologyKey"), fd.TopologyKey, msg))
			}
		}
		errs = append(errs, validateCountOrPercent(fd.MaxConcurrent, 1, fp.Child("maxConcurrent"))...)
	}
	errs = append(errs, nonNegative(s.NodeCooldown, p.Child("nodeCooldown"))...)
	if ac := s.AttemptCap; ac != nil {
		ap := p.Child("attemptCap")
		if ac.MaxAttempts < 1 || ac.MaxAttempts > 100 {
			errs = append(errs, field.Invalid(ap.Child("maxAttempts"), ac.MaxAttempts, "must be between 1 and 100"))
		}
		if m := ac.MaxFailuresPerGPU; m != nil && (*m < 1 || *m > 100) {
			errs = append(errs, field.Invalid(ap.Child("maxFailuresPerGPU"), *m, "must be between 1 and 100"))
		}
		errs = append(errs, positive(ac.Window, ap.Child("window"))...)
	}
	if len(s.MaintenanceWindows) > 16 {
		errs = append(errs, field.TooMany(p.Child("maintenanceWindows"), len(s.MaintenanceWindows), 16))
	}
	for i := range s.MaintenanceWindows {
		errs = append(errs, validateWindow(&s.MaintenanceWindows[i], p.Child("maintenanceWindows").Index(i))...)
	}
	return errs
}

func validateWindow(w *v1alpha1.MaintenanceWindow, p *field.Path) field.ErrorList {
	_, errs := ParseWindow(*w, p)
	return errs
}

// validateMachine checks the last-rung fields: at most one provider, the
// success criterion it needs, and a Redfish address template that parses.
func validateMachine(s *v1alpha1.NodeOperationTemplateSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if s.ClusterAPI != nil {
		set = append(set, "clusterAPI")
	}
	if s.Metal3 != nil {
		set = append(set, "metal3")
		errs = append(errs, validateEnum(s.Metal3.Mode, []string{"hard", "soft"}, p.Child("metal3", "mode"))...)
	}
	if r := s.Redfish; r != nil {
		set = append(set, "redfish")
		rp := p.Child("redfish")
		if r.Address == "" {
			errs = append(errs, field.Required(rp.Child("address"), `the BMC's base URL as a Go template over the Node, e.g. https://{{ index .Labels "node-restriction.kubernetes.io/kubemedic-bmc" }}`))
		} else if _, err := ParseAddressTemplate(r.Address); err != nil {
			errs = append(errs, field.Invalid(rp.Child("address"), r.Address, err.Error()))
		}
		errs = append(errs, maxLen(r.Address, 1024, rp.Child("address"))...)
		if r.CredentialsSecret == "" {
			errs = append(errs, field.Required(rp.Child("credentialsSecret"), "a Secret in the remediator's namespace with the keys username and password"))
		}
		errs = append(errs, maxLen(r.CredentialsSecret, 253, rp.Child("credentialsSecret"))...)
		errs = append(errs, maxLen(r.System, 256, rp.Child("system"))...)
		errs = append(errs, validateEnum(r.ResetType, []string{"PowerCycle", "ForceRestart", "GracefulRestart"}, rp.Child("resetType"))...)
	}
	if len(set) > 1 {
		errs = append(errs, field.Forbidden(p, "set at most one of clusterAPI, metal3 and redfish; this template sets "+strings.Join(set, " and ")))
	}
	switch kind := s.MachineKind(); {
	case kind == v1alpha1.MachineClusterAPI && s.SuccessCriterion != v1alpha1.SuccessMachineReplaced:
		errs = append(errs, field.Invalid(p.Child("successCriterion"), s.SuccessCriterion, "a clusterAPI template succeeds when the machine is replaced: set MachineReplaced"))
	case kind != v1alpha1.MachineClusterAPI && s.SuccessCriterion == v1alpha1.SuccessMachineReplaced:
		errs = append(errs, field.Invalid(p.Child("successCriterion"), s.SuccessCriterion, "MachineReplaced is for clusterAPI templates only"))
	case (kind == v1alpha1.MachineMetal3 || kind == v1alpha1.MachineRedfish) && s.SuccessCriterion != v1alpha1.SuccessNodeRebooted:
		errs = append(errs, field.Invalid(p.Child("successCriterion"), s.SuccessCriterion, "a "+lowerFirst(string(kind))+" template power-cycles the machine: set NodeRebooted"))
	}
	return errs
}

// lowerFirst turns a MachineKind into its field name (ClusterAPI → clusterAPI).
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func validateTemplateSpec(s *v1alpha1.NodeOperationTemplateSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, maxLen(s.Description, 2048, p.Child("description"))...)
	errs = append(errs, validateEnum(string(s.SuccessCriterion), []string{string(v1alpha1.SuccessPodSucceeded), string(v1alpha1.SuccessNodeRebooted), string(v1alpha1.SuccessMachineReplaced), string(v1alpha1.SuccessNone)}, p.Child("successCriterion"))...)
	errs = append(errs, validateMachine(s, p)...)
	kind := s.MachineKind()
	switch {
	case kind != "" && s.Image != "":
		errs = append(errs, field.Forbidden(p.Child("image"), "a "+lowerFirst(string(kind))+" template asks the machine provider and runs no pod; remove the image"))
	case kind == "" && s.SuccessCriterion == v1alpha1.SuccessNone && s.Image != "":
		errs = append(errs, field.Forbidden(p.Child("image"), "successCriterion None runs no pod; remove the image"))
	case kind == "" && s.SuccessCriterion != v1alpha1.SuccessNone && s.Image == "":
		errs = append(errs, field.Required(p.Child("image"), "the operation container's image"))
	}
	errs = append(errs, maxLen(s.Image, 512, p.Child("image"))...)
	envNames := sets.New[string]()
	for i, e := range s.Env {
		ep := p.Child("env").Index(i)
		errs = append(errs, validateEnvName(e.Name, ep.Child("name"))...)
		if envNames.Has(e.Name) {
			errs = append(errs, field.Duplicate(ep.Child("name"), e.Name))
		}
		envNames.Insert(e.Name)
	}
	for i, prm := range s.Parameters {
		pp := p.Child("parameters").Index(i)
		errs = append(errs, validateEnvName(prm.Name, pp.Child("name"))...)
		if envNames.Has(prm.Name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), prm.Name))
		}
		envNames.Insert(prm.Name)
		if prm.MessageRegex == "" {
			errs = append(errs, field.Required(pp.Child("messageRegex"), "a regular expression with one capture group"))
		} else if re, err := regexp.Compile(prm.MessageRegex); err != nil {
			errs = append(errs, field.Invalid(pp.Child("messageRegex"), prm.MessageRegex, "not a valid RE2 regular expression: "+regexpError(err)))
		} else if re.NumSubexp() != 1 {
			errs = append(errs, field.Invalid(pp.Child("messageRegex"), prm.MessageRegex, fmt.Sprintf("must have exactly one capture group (the value), has %d", re.NumSubexp())))
		}
	}
	for i, c := range s.Capabilities {
		if c == "" || strings.ToUpper(c) != c || strings.HasPrefix(c, "CAP_") {
			errs = append(errs, field.Invalid(p.Child("capabilities").Index(i), c, `must be a capability name without the CAP_ prefix, e.g. "SYS_ADMIN"`))
		}
	}
	names := sets.New[string]()
	for i, h := range s.HostPaths {
		hp := p.Child("hostPaths").Index(i)
		errs = append(errs, validateDNSLabel(h.Name, hp.Child("name"))...)
		if names.Has(h.Name) {
			errs = append(errs, field.Duplicate(hp.Child("name"), h.Name))
		}
		names.Insert(h.Name)
		if !strings.HasPrefix(h.Path, "/") {
			errs = append(errs, field.Invalid(hp.Child("path"), h.Path, "must be an absolute path"))
		}
		if !strings.HasPrefix(h.MountPath, "/") {
			errs = append(errs, field.Invalid(hp.Child("mountPath"), h.MountPath, "must be an absolute path"))
		}
		if h.MountPropagation != nil {
			errs = append(errs, validateEnum(string(*h.MountPropagation), []string{"None", "HostToContainer", "Bidirectional"}, hp.Child("mountPropagation"))...)
			if *h.MountPropagation == "Bidirectional" && !s.Privileged {
				errs = append(errs, field.Forbidden(hp.Child("mountPropagation"), "Bidirectional propagation needs privileged: true"))
			}
		}
	}
	if s.ServiceAccountName != "" {
		errs = append(errs, validateDNSSubdomain(s.ServiceAccountName, p.Child("serviceAccountName"))...)
	}
	return append(errs, positive(s.Timeout, p.Child("timeout"))...)
}

func validateNodeOperationSpec(s *v1alpha1.NodeOperationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.NodeName == "" {
		errs = append(errs, field.Required(p.Child("nodeName"), "the node to operate on"))
	} else {
		errs = append(errs, validateDNSSubdomain(s.NodeName, p.Child("nodeName"))...)
	}
	errs = append(errs, validateOperationOrQuarantine(s.Operation, s.Quarantine, p)...)
	if s.Step != "" && s.Policy == "" {
		errs = append(errs, field.Required(p.Child("policy"), "step is set only together with policy"))
	}
	if s.Drain != nil {
		errs = append(errs, validateDrain(s.Drain, p.Child("drain"))...)
	}
	if s.Timeout != nil {
		errs = append(errs, positive(s.Timeout, p.Child("timeout"))...)
	}
	if s.Validate != nil {
		errs = append(errs, validateStepValidate(&s.StepAction, p)...)
	}
	errs = append(errs, nonNegative(s.HealthyFor, p.Child("healthyFor"))...)
	errs = append(errs, nonNegative(s.RecoveryTimeout, p.Child("recoveryTimeout"))...)
	return append(errs, maxLen(s.Reason, 1024, p.Child("reason"))...)
}

func validateReclaimRules(r *v1alpha1.ReclaimRules, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, maxLen(r.Description, 1024, p.Child("description"))...)
	if r.Idle == nil && r.MaxLifetime == nil && r.MaxPending == nil {
		errs = append(errs, field.Required(p, "set at least one of idle, maxLifetime or maxPending"))
	}
	if r.Idle != nil {
		ip := p.Child("idle")
		if u := r.Idle.UtilizationBelowPercent; u < 1 || u > 100 {
			errs = append(errs, field.Invalid(ip.Child("utilizationBelowPercent"), u, "must be a percentage between 1 and 100"))
		}
		errs = append(errs, positive(&r.Idle.Window, ip.Child("window"))...)
	}
	if r.MaxLifetime != nil {
		errs = append(errs, positive(r.MaxLifetime, p.Child("maxLifetime"))...)
	}
	if r.MaxPending != nil {
		errs = append(errs, positive(r.MaxPending, p.Child("maxPending"))...)
	}
	errs = append(errs, nonNegative(r.MaxSnooze, p.Child("maxSnooze"))...)
	return append(errs, nonNegative(r.GracePeriod, p.Child("gracePeriod"))...)
}

// validateCountOrPercent checks an intstr that is a count >= lowest or a
// percentage from lowest% to 100%.
func validateCountOrPercent(v intstr.IntOrString, lowest int, p *field.Path) field.ErrorList {
	if v.Type == intstr.Int {
		if int(v.IntVal) < lowest {
			return field.ErrorList{field.Invalid(p, v.IntVal, fmt.Sprintf("must be a count >= %d or a percentage like \"20%%\", got %d", lowest, v.IntVal))}
		}
		return nil
	}
	s := v.StrVal
	num, isPct := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	if !isPct || err != nil || strings.HasPrefix(num, "+") {
		hint := ""
		if err == nil && !isPct {
			hint = fmt.Sprintf(" (write a count without quotes, %s, or add %%)", num)
		}
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("must be a count or a percentage like \"20%%\", got %q%s", s, hint))}
	}
	if n < lowest || n > 100 {
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("percentage must be between %d%% and 100%%, got %q", lowest, s))}
	}
	return nil
}

func nonNegative(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must not be negative, got %q", d.Duration))}
	}
	return nil
}

func positive(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must be a positive duration, got %q", d.Duration))}
	}
	return nil
}

func validateSelector(s *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, p)
}

func validateEnum(v string, allowed []string, p *field.Path) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

func validateDNSLabel(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validateDNSSubdomain(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func validateEnvName(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "an environment variable name")}
	}
	if !envName.MatchString(v) || len(v) > 128 {
		return field.ErrorList{field.Invalid(p, v, "must be an environment variable name: letters, digits and _, not starting with a digit")}
	}
	if strings.HasPrefix(v, "KUBEMEDIC_") {
		return field.ErrorList{field.Invalid(p, v, "the KUBEMEDIC_ prefix is reserved for the variables the remediator sets")}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func maxLen(v string, n int, p *field.Path) field.ErrorList {
	if len(v) > n {
		return field.ErrorList{field.TooLong(p, "", n)}
	}
	return nil
}

func duplicates(items []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, v := range items {
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(p.Index(i), v))
		}
		seen.Insert(v)
	}
	return errs
}

func regexpError(err error) string {
	msg := err.Error()
	return strings.TrimPrefix(msg, "error parsing regexp: ")
}
