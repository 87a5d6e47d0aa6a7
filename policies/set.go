package policies

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// ValidateSet validates every document on its own and then as a set:
// names are unique per kind, every operation a RemediationPolicy or
// NodeOperation names is a NodeOperationTemplate in the set, and every
// namespaced ReclaimPolicy is no looser than the ClusterReclaimPolicies in
// the set that select its namespace. Problems are located by file and line.
func ValidateSet(docs []*Document) []Problem {
	var problems []Problem
	add := func(d *Document, errs field.ErrorList) {
		problems = append(problems, d.Problems(errs)...)
	}

	templates := map[string]*v1alpha1.NodeOperationTemplate{}
	seen := map[string]*Document{}
	var clusterReclaim []*v1alpha1.ClusterReclaimPolicy
	for _, d := range docs {
		add(d, Validate(d.Object))
		m := d.Object.(metav1.Object)
		key := d.Kind + "/" + m.GetNamespace() + "/" + m.GetName()
		if first, dup := seen[key]; dup && m.GetName() != "" {
			e := field.Duplicate(field.NewPath("metadata", "name"), m.GetName())
			e.Detail = fmt.Sprintf("%s %q is also defined at %s:%d", d.Kind, m.GetName(), first.File, first.Line)
			add(d, field.ErrorList{e})
		} else {
			seen[key] = d
		}
		switch o := d.Object.(type) {
		case *v1alpha1.NodeOperationTemplate:
			templates[o.Name] = o
		case *v1alpha1.ClusterReclaimPolicy:
			clusterReclaim = append(clusterReclaim, o)
		}
	}

	known := make([]string, 0, len(templates))
	for t := range templates {
		known = append(known, t)
	}
	sort.Strings(known)
	missing := func(p *field.Path, name string) *field.Error {
		if templates[name] != nil {
			return nil
		}
		hint := "load the file that defines it too, e.g. -f policies/examples/operation-templates.yaml"
		if len(known) > 0 {
			hint = "the loaded set has " + strings.Join(known, ", ")
		}
		e := field.NotFound(p, name)
		e.Detail = fmt.Sprintf("no NodeOperationTemplate named %q; %s", name, hint)
		return e
	}
	for _, d := range docs {
		var errs field.ErrorList
		switch o := d.Object.(type) {
		case *v1alpha1.RemediationPolicy:
			if dg := o.Spec.Diagnostics; dg != nil && dg.Operation != "" {
				if e := missing(field.NewPath("spec", "diagnostics", "operation"), dg.Operation); e != nil {
					errs = append(errs, e)
				}
			}
			if v := o.Spec.Validate; v != nil && v.Operation != "" {
				if e := missing(field.NewPath("spec", "validate", "operation"), v.Operation); e != nil {
					errs = append(errs, e)
				}
			}
			for i, st := range o.Spec.Steps {
				sp := field.NewPath("spec", "steps").Index(i)
				if st.Operation != "" {
					if e := missing(sp.Child("operation"), st.Operation); e != nil {
						errs = append(errs, e)
					}
				}
				if dg := st.Diagnostics; dg != nil && dg.Operation != "" {
					if e := missing(sp.Child("diagnostics", "operation"), dg.Operation); e != nil {
						errs = append(errs, e)
					}
				}
				if v := st.Validate; v != nil && v.Operation != "" {
					if e := missing(sp.Child("validate", "operation"), v.Operation); e != nil {
						errs = append(errs, e)
					}
				}
				errs = append(errs, diagnosticsFits(o, &o.Spec.Steps[i], templates, sp)...)
			}
		case *v1alpha1.NodeOperation:
			if o.Spec.Operation != "" {
				if e := missing(field.NewPath("spec", "operation"), o.Spec.Operation); e != nil {
					errs = append(errs, e)
				}
			}
			if v := o.Spec.Validate; v != nil && v.Operation != "" {
				if e := missing(field.NewPath("spec", "validate", "operation"), v.Operation); e != nil {
					errs = append(errs, e)
				}
			}
		case *v1alpha1.ValidationPolicy:
			if v := o.Spec.Validate; v.Operation != "" {
				if e := missing(field.NewPath("spec", "validate", "operation"), v.Operation); e != nil {
					errs = append(errs, e)
				}
			}
		case *v1alpha1.ReclaimPolicy:
			for _, c := range clusterReclaim {
				if SelectsNamespace(c, o.Namespace, nil) {
					errs = append(errs, CheckReclaimOverride(o, c)...)
				}
			}
		}
		add(d, errs)
	}
	return problems
}

// diagnosticsFits checks that the step's capture (its own or the policy's)
// takes no longer than the step may: the capture's timeout, else its
// template's, against the step's timeout, else its template's. Unknown
// templates are reported by ValidateSet already.
func diagnosticsFits(p *v1alpha1.RemediationPolicy, st *v1alpha1.RemediationStep, templates map[string]*v1alpha1.NodeOperationTemplate, sp *field.Path) field.ErrorList {
	dg := StepDiagnostics(&p.Spec, st)
	if dg == nil || (dg.Timeout != nil && st.Timeout != nil) {
		// Both set: Validate compares them already.
		return nil
	}
	capture, ok := DiagnosticsTimeout(dg, templates[dg.Operation])
	if !ok {
		return nil
	}
	var step time.Duration
	switch tpl := templates[st.Operation]; {
	case st.Timeout != nil:
		step = st.Timeout.Duration
	case tpl != nil && tpl.Spec.Timeout != nil:
		step = tpl.Spec.Timeout.Duration
	case tpl != nil:
		step = DefaultTemplateTimeout
	default:
		return nil
	}
	if capture <= step {
		return nil
	}
	path := sp.Child("diagnostics", "timeout")
	if st.Diagnostics == nil {
		path = field.NewPath("spec", "diagnostics", "timeout")
	}
	return field.ErrorList{field.Invalid(path, capture.String(),
		fmt.Sprintf("the capture (%s) may take longer than step %q's operation may (%s): a capture must not hold a repair longer than the repair may take", dg.Operation, st.Name, step))}
}

// Problems locates field errors of the document by file and line.
func (d *Document) Problems(errs field.ErrorList) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem{File: d.File, Line: d.Locate(e.Field), Field: e.Field, Detail: detail(e)})
	}
	return out
}

// detail renders a field error without its field path, the way ops read it:
// the explanation, with the value where it helps.
func detail(e *field.Error) string {
	if e.Type == field.ErrorTypeInvalid && e.Detail != "" {
		return e.Detail
	}
	if e.Type == field.ErrorTypeNotFound && e.Detail != "" {
		return e.Detail
	}
	return e.ErrorBody()
}
