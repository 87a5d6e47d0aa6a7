// Package deploy_test checks the manifests under deploy/: that they render
// with kustomize and that a real API server accepts them (server-side dry
// run), that the RBAC stays narrow, that the Deployment's arguments are
// flags the remediator has, and that the two copies of the
// NodeOperationTemplates are one text.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

// readRepoFile reads a file by its path relative to the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	require.NoError(t, err)
	return b
}

// splitDocs splits a multi-document YAML stream into its non-empty
// documents, each as an unstructured object for kind and name.
func splitDocs(t *testing.T, name string, stream []byte) []docObject {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var docs []docObject
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, "%s: read YAML document", name)
		var u unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal(raw, &u.Object), "%s: parse YAML document", name)
		if len(u.Object) == 0 {
			continue // only comments
		}
		docs = append(docs, docObject{Obj: &u, Raw: raw})
	}
}

// docObject is one YAML document: parsed for kind and name, and raw for a
// strict typed decode.
type docObject struct {
	Obj *unstructured.Unstructured
	Raw []byte
}

// decodeStrict decodes a document into a typed object, failing on fields
// the type does not have (a typo in a manifest is an error, not a no-op).
func decodeStrict(t *testing.T, d docObject, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(d.Raw, into), "%s %s", d.Obj.GetKind(), d.Obj.GetName())
}

// kustomize renders a kustomization directory (relative to the repository
// root) with the kubectl in dir.
func kustomize(t *testing.T, kubectl, dir string) []byte {
	t.Helper()
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot(t), dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize %s: %s", dir, stderr.String())
	return out
}
