package policies

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
)

// ParseAddressTemplate parses a redfish template's address: a Go template
// over the Node that gives the BMC's base URL. Missing keys are errors, not
// "<no value>", so that a node without the BMC annotation fails loudly.
func ParseAddressTemplate(s string) (*template.Template, error) {
	t, err := template.New("address").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a valid Go template: %w", err)
	}
	return t, nil
}

// addressData is what an address template sees of the Node.
type addressData struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
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
	d := addressData{Name: node.Name, Labels: node.Labels, Annotations: node.Annotations}
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("redfish address %q for node %s: %w", tpl, node.Name, err)
	}
	addr := strings.TrimSpace(b.String())
	u, err := url.Parse(addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("redfish address %q for node %s gave %q: %w", tpl, node.Name, addr, err)
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("redfish address %q for node %s gave %q: want an http or https URL (is the node's BMC label or annotation missing or empty?)", tpl, node.Name, addr)
	case u.Host == "" || strings.HasPrefix(u.Host, ":"):
		return "", fmt.Errorf("redfish address %q for node %s gave %q: no host (is the node's BMC label or annotation missing or empty?)", tpl, node.Name, addr)
	}
	return addr, nil
}
