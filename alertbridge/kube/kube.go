package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// PageSize is how many NodeOperations one list request returns; the
// lister pages through the rest, so a large history never arrives in one
// response.
const PageSize = 500

// RESTConfig is the bridge's connection to the API server: the kubeconfig
// file when one is given, else the pod's service account (in-cluster).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a pod with a service account token (%w)", err)
	}
	return cfg, nil
}

// Lister lists NodeOperations by node. The CRD has no selectable field for
// spec.nodeName, and the kubemedic.io/node label is missing on operations
// people create and on node names too long for a label value, so it lists
// them all, page by page, and keeps those of the asked nodes.
type Lister struct {
	reader client.Reader
}

// New returns a Lister on the API server of cfg, with a client that knows
// only kubemedic's types.
func New(cfg *rest.Config) (*Lister, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Lister{reader: c}, nil
}

// NewFromReader returns a Lister that reads through r.
func NewFromReader(r client.Reader) *Lister { return &Lister{reader: r} }

// NodeOperations returns the NodeOperations whose spec.nodeName is one of
// nodes, in the API server's order.
func (l *Lister) NodeOperations(ctx context.Context, nodes []string) ([]v1alpha1.NodeOperation, error) {
	var out []v1alpha1.NodeOperation
	cont := ""
	for {
		var list v1alpha1.NodeOperationList
		opts := []client.ListOption{client.Limit(PageSize)}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := l.reader.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("list nodeoperations: %w", withoutURL(err))
		}
		for _, op := range list.Items {
			if slices.Contains(nodes, op.Spec.NodeName) {
				out = append(out, op)
			}
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// withoutURL drops the request URL from a transport error: the API
// server's address does not belong in a GitHub issue.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
