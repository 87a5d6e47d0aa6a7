package policies

import (
	"fmt"
	"sort"
	"strings"

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

	templates := map[string]bool{}
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
			templates[o.Name] = true
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
		if templates[name] {
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
			for i, st := range o.Spec.Steps {
				if st.Operation != "" {
					if e := missing(field.NewPath("spec", "steps").Index(i).Child("operation"), st.Operation); e != nil {
						errs = append(errs, e)
					}
				}
			}
		case *v1alpha1.NodeOperation:
			if o.Spec.Operation != "" {
				if e := missing(field.NewPath("spec", "operation"), o.Spec.Operation); e != nil {
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
