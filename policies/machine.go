package policies

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
)

// ParseAddressTemplate parses a redfish template's address: a Go template
// over the Node (.Name, and .Labels holding only the labels under
// ProtectedLabelPrefix) that gives the BMC's base URL. Missing keys are
// errors, not "<no value>", so that a node without the BMC label fails
// loudly; so is a template that reads anything else of the node, and one
// that reads a label a kubelet may write.
func ParseAddressTemplate(s string) (*template.Template, error) {
	t, err := template.New("address").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a valid Go template: %w", err)
	}
	// Executed against an empty node: a field other than .Name and .Labels
	// fails here, at validation, rather than at the last rung.
	var b bytes.Buffer
	if err := t.Execute(&b, addressData{}); err != nil && !strings.Contains(err.Error(), "map has no entry for key") {
		return nil, fmt.Errorf("the template sees only .Name and .Labels (the node's labels under %s): %w", ProtectedLabelPrefix, err)
	}
	if m := labelRefRE.FindAllStringSubmatch(s, -1); m != nil {
		for _, ref := range m {
			if !strings.HasPrefix(ref[1], ProtectedLabelPrefix) {
				return nil, fmt.Errorf("label %q: only labels under %s say where a BMC is, as the node's own kubelet cannot set them", ref[1], ProtectedLabelPrefix)
			}
		}
	}
	return t, nil
}

// labelRefRE finds `index .Labels "key"` in a template.
var labelRefRE = regexp.MustCompile(`index\s+\.Labels\s+"([^"]*)"`)

// ProtectedLabelPrefix marks the node labels a node's own kubelet cannot
// set or change (the NodeRestriction admission plugin): only they, and the
// node's name, may say where a node's BMC is. A kubelet can write its
// Node's other labels and its annotations, and a compromised node that
// could set its own BMC address would have kubemedic send the BMC
// credentials, and a power cycle, wherever it liked.
const ProtectedLabelPrefix = "node-restriction.kubernetes.io/"

// addressData is what an address template sees of the Node: its name and
// its protected labels. Annotations and other labels are left out on
// purpose (see ProtectedLabelPrefix).
type addressData struct {
	Name   string
	Labels map[string]string
}

// BMCAddress executes a redfish template's address for node and checks
// that the result is an http or https URL with a host. Errors name the node
// and the template.
func BMCAddress(tpl string, node *corev1.Node) (string, error) {
	t, err := ParseAddressTemplate(tpl)
	if err != nil {
		return "", fmt.Errorf("redfish address %q: %w", tpl, err)
	}
	var b bytes.Buffer
	d := addressData{Name: node.Name, Labels: map[string]string{}}
	for k, v := range node.Labels {
		if strings.HasPrefix(k, ProtectedLabelPrefix) {
			d.Labels[k] = v
		}
	}
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("redfish address %q for node %s: %w", tpl, node.Name, err)
	}
	addr := strings.TrimSpace(b.String())
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("redfish address %q for node %s gave %q: %w", tpl, node.Name, addr, err)
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("redfish address %q for node %s gave %q: want an http or https URL (is the node's BMC label missing or empty?)", tpl, node.Name, addr)
	case u.Host == "" || strings.HasPrefix(u.Host, ":"):
		return "", fmt.Errorf("redfish address %q for node %s gave %q: no host (is the node's BMC label missing or empty?)", tpl, node.Name, addr)
	}
	return addr, nil
}
