package plan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestPodName(t *testing.T) {
	// The longest operation name there is: 253 characters, with dots
	// (OperationName of a long policy on a long node name).
	long := OperationName(strings.Repeat("p", 60), strings.Repeat("gpu-node.", 30)+"example.com", "episode", 3)
	require.Len(t, long, validation.DNS1123SubdomainMaxLength)
	for _, tc := range []struct {
		desc, name, suffix string
		want               string
	}{
		{desc: "a DNS label stays as it is (pods made before keep their names)", name: "by-hand", want: "by-hand"},
		{desc: "with its suffix", name: "by-hand", suffix: "-diag", want: "by-hand-diag"},
		{desc: "a policy's operation: dots become dashes, and a hash of the whole name follows",
			name: "xid.gpu-0.28cc7eea-0", want: "xid-gpu-0-28cc7eea-0-" + shortHash("xid.gpu-0.28cc7eea-0")},
		{desc: "its capture pod: the same, and the suffix",
			name: "xid.gpu-0.28cc7eea-0", suffix: "-diag", want: "xid-gpu-0-28cc7eea-0-" + shortHash("xid.gpu-0.28cc7eea-0") + "-diag"},
		{desc: "a node with a domain", name: "kubemedic-flush-gpu-0.example.com",
			want: "kubemedic-flush-gpu-0-example-com-" + shortHash("kubemedic-flush-gpu-0.example.com")},
		{desc: "63 characters without dots stay", name: strings.Repeat("a", 63), want: strings.Repeat("a", 63)},
		{desc: "64 characters are cut, with the hash", name: strings.Repeat("a", 64),
			want: strings.Repeat("a", 54) + "-" + shortHash(strings.Repeat("a", 64))},
		{desc: "fitting without its suffix, not with it", name: strings.Repeat("a", 60), suffix: "-diag",
			want: strings.Repeat("a", 49) + "-" + shortHash(strings.Repeat("a", 60)) + "-diag"},
		{desc: "the cut does not end in a dash", name: strings.Repeat("a", 53) + ".b.c.d.e.f",
			want: strings.Repeat("a", 53) + "-" + shortHash(strings.Repeat("a", 53)+".b.c.d.e.f")},
		{desc: "253 characters with dots", name: long,
			want: strings.Repeat("p", 54) + "-" + shortHash(long)},
		{desc: "253 characters with dots, capture", name: long, suffix: "-diag",
			want: strings.Repeat("p", 49) + "-" + shortHash(long) + "-diag"},
		{desc: "upper case and other characters (not a Kubernetes name, but safe)", name: "GPU_0/xid",
			want: "gpu-0-xid-" + shortHash("GPU_0/xid")},
		{desc: "nothing readable: the hash alone", name: "...", want: shortHash("...")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := PodName(tc.name, tc.suffix)
			require.Equal(t, tc.want, got)
			require.Empty(t, validation.IsDNS1123Label(got), "%q is a DNS label", got)
			require.Equal(t, got, PodName(tc.name, tc.suffix), "deterministic")
		})
	}
}

// TestPodNameUnique: names that read the same once their dots are dashes,
// or that share a long prefix, still get pods of their own; an operation's
// pod and its capture pod differ.
func TestPodNameUnique(t *testing.T) {
	prefix := strings.Repeat("x", 70)
	names := []string{"a.b-c", "a-b.c", "a.b.c", "a-b-c", prefix + "1", prefix + "2", "xid.gpu-0.28cc7eea-0", "xid.gpu-0.28cc7eea-1"}
	seen := map[string]string{}
	for _, n := range names {
		for _, suffix := range []string{"", "-diag"} {
			got := PodName(n, suffix)
			require.NotContains(t, seen, got, "%q%s and %q", n, suffix, seen[got])
			seen[got] = n + suffix
		}
	}
}

func TestOperationAndCapturePodNames(t *testing.T) {
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: OperationName("gpu-xid", "gpu-0.dc1.example.com", "ep", 0)}}
	require.Contains(t, op.Name, ".")
	for _, got := range []string{OperationPodName(op), CapturePodName(op)} {
		require.Empty(t, validation.IsDNS1123Label(got), got)
		require.True(t, strings.HasPrefix(got, "gpu-xid-gpu-0-dc1-example-com-"), "readable: %s", got)
	}
	require.True(t, strings.HasSuffix(CapturePodName(op), "-diag"))
	require.Equal(t, OperationPodName(op)+"-diag", CapturePodName(op), "the capture pod is the operation pod's name and -diag while both fit")
}
