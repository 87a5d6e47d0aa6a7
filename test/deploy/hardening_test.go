package deploy_test

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of a kustomization.yaml the checks read.
type kustomization struct {
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest"`
	} `json:"images"`
}

func readKustomization(t *testing.T, rel string) kustomization {
	t.Helper()
	var k kustomization
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, rel), &k), rel)
	return k
}

// rendered is one kustomize output, split by kind.
type rendered struct {
	docs        []docObject
	deployments []appsv1.Deployment
	daemonSets  []appsv1.DaemonSet
	pdbs        []policyv1.PodDisruptionBudget
	// templateImages are the NodeOperationTemplates' spec.image.
	templateImages []string
}

func render(t *testing.T, dir string) rendered {
	t.Helper()
	var r rendered
	r.docs = splitDocs(t, "kustomize "+dir, kustomize(t, kubectlForRender(t), dir))
	for _, d := range r.docs {
		switch d.Obj.GetKind() {
		case "Deployment":
			var dep appsv1.Deployment
			decodeStrict(t, d, &dep)
			r.deployments = append(r.deployments, dep)
		case "DaemonSet":
			var ds appsv1.DaemonSet
			decodeStrict(t, d, &ds)
			r.daemonSets = append(r.daemonSets, ds)
		case "PodDisruptionBudget":
			var pdb policyv1.PodDisruptionBudget
			decodeStrict(t, d, &pdb)
			r.pdbs = append(r.pdbs, pdb)
		case "NodeOperationTemplate":
			img, _, err := unstructured.NestedString(d.Obj.Object, "spec", "image")
			require.NoError(t, err)
			if img != "" {
				r.templateImages = append(r.templateImages, img)
			}
		}
	}
	return r
}

// images returns every image the output runs, with where it is used.
func (r rendered) images() map[string][]string {
	out := map[string][]string{}
	add := func(where string, spec corev1.PodSpec) {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			out[c.Image] = append(out[c.Image], where+"/"+c.Name)
		}
	}
	for _, d := range r.deployments {
		add("Deployment/"+d.Name, d.Spec.Template.Spec)
	}
	for _, d := range r.daemonSets {
		add("DaemonSet/"+d.Name, d.Spec.Template.Spec)
	}
	for _, img := range r.templateImages {
		out[img] = append(out[img], "NodeOperationTemplate")
	}
	return out
}

// splitImage splits an image reference into its name and its tag or digest.
func splitImage(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// TestImagesPinnedByKustomization checks that deploy/kustomization.yaml's
// images: list names every image the rendered manifests run, with a tag or
// digest (never latest), and that every entry is used: one edit there
// retargets a registry for everything.
func TestImagesPinnedByKustomization(t *testing.T) {
	k := readKustomization(t, "deploy/kustomization.yaml")
	out := render(t, "deploy")
	entries := map[string]int{}
	for i, e := range k.Images {
		require.NotEmpty(t, e.NewName, "images[%d] %s: set newName, so that a mirror is one edit", i, e.Name)
		require.NotContains(t, entries, e.NewName)
		entries[e.NewName] = i
	}
	used := map[int]bool{}
	imgs := out.images()
	require.NotEmpty(t, imgs)
	for ref, where := range imgs {
		name, tag, digest := splitImage(ref)
		require.True(t, tag != "" || digest != "", "%s (%v) has neither tag nor digest", ref, where)
		require.NotEqual(t, "latest", tag, "%s (%v)", ref, where)
		i, ok := entries[name]
		require.True(t, ok, "%s (%v) is not in deploy/kustomization.yaml's images:", ref, where)
		used[i] = true
		if e := k.Images[i]; e.NewTag != "" {
			require.Equal(t, e.NewTag, tag, "%s (%v): the tag is images:'s", ref, where)
		}
	}
	for i, e := range k.Images {
		require.True(t, used[i], "images: entry %s matches no image", e.Name)
	}
}

// TestImageBuildCoversDeploy checks the image build against the manifests:
// `make images` builds every binary in cmd/, every kubemedic image deploy/
// runs comes from one of them, and kubemedic-detect's image is laid out
// the way the DaemonSet and the NPD monitor configs expect.
func TestImageBuildCoversDeploy(t *testing.T) {
	root := repoRoot(t)
	mains, err := filepath.Glob(filepath.Join(root, "cmd", "*", "main.go"))
	require.NoError(t, err)
	// kubemedic-demo runs on a developer's machine and links the stand-ins:
	// it is the one binary never built into an image (cmd/deps_test.go
	// keeps it out of every shipped binary).
	const demo = "./cmd/kubemedic-demo"
	var cmds []string
	for _, m := range mains {
		if cmd := "./cmd/" + filepath.Base(filepath.Dir(m)); cmd != demo {
			cmds = append(cmds, cmd)
		}
	}
	require.GreaterOrEqual(t, len(cmds), 5)
	require.Len(t, mains, len(cmds)+1, "cmd/kubemedic-demo/main.go exists")
	m := regexp.MustCompile(`(?m)^IMAGE_CMDS\s*:?=\s*(.+)$`).FindSubmatch(readRepoFile(t, "Makefile"))
	require.NotNil(t, m, "the Makefile has no IMAGE_CMDS")
	require.ElementsMatch(t, cmds, strings.Fields(string(m[1])), "make images builds every binary in cmd/ but the demo")

	// The GPU tests' images are kubemedic-validate built again on each
	// tool's image: kubemedic-validate-<test> for each of VALIDATE_TESTS.
	vt := regexp.MustCompile(`(?m)^VALIDATE_TESTS\s*:?=\s*(.+)$`).FindSubmatch(readRepoFile(t, "Makefile"))
	require.NotNil(t, vt, "the Makefile has no VALIDATE_TESTS")
	out := render(t, "deploy")
	for ref, where := range out.images() {
		name, _, _ := splitImage(ref)
		if bin, ok := strings.CutPrefix(name, "ghcr.io/kubemedic/"); ok {
			if test, ok := strings.CutPrefix(bin, "kubemedic-validate-"); ok {
				require.Contains(t, strings.Fields(string(vt[1])), test, "%s (%v): make images builds no such test image", ref, where)
				bin = "kubemedic-validate"
			}
			require.Contains(t, cmds, "./cmd/"+bin, "%s (%v) is built from no cmd/ directory", ref, where)
		}
	}

	var ko struct {
		DefaultBaseImage   string            `json:"defaultBaseImage"`
		DefaultPlatforms   []string          `json:"defaultPlatforms"`
		BaseImageOverrides map[string]string `json:"baseImageOverrides"`
		Builds             []struct {
			ID   string   `json:"id"`
			Main string   `json:"main"`
			Env  []string `json:"env"`
		} `json:"builds"`
	}
	require.NoError(t, yaml.UnmarshalStrict(readRepoFile(t, ".ko.yaml"), &ko))
	require.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, ko.DefaultPlatforms)
	require.Regexp(t, `^gcr\.io/distroless/static[-a-z0-9]*:nonroot$`, ko.DefaultBaseImage,
		"static binaries on distroless static, as user 65532")
	detectBase := ko.BaseImageOverrides["github.com/kubemedic/kubemedic/cmd/kubemedic-detect"]
	require.Len(t, ko.Builds, 1)
	require.Equal(t, "./cmd/kubemedic-detect", ko.Builds[0].Main)
	require.Contains(t, ko.Builds[0].Env, "CGO_ENABLED=1", "go-nvml and go-dcgm need cgo")
	fi, err := os.Stat(filepath.Join(root, "deploy/images/cgo-cc"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111, "deploy/images/cgo-cc must be executable: make images runs it as CC")

	// The plugin path every monitor config runs.
	configs, err := filepath.Glob(filepath.Join(root, "deploy/npd/*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, configs)
	var plugin string
	for _, f := range configs {
		var cfg struct {
			Rules []struct {
				Path string `json:"path"`
			} `json:"rules"`
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &cfg), f)
		for _, r := range cfg.Rules {
			if plugin == "" {
				plugin = r.Path
			}
			require.Equal(t, plugin, r.Path, "%s: every monitor runs the same binary", f)
		}
	}

	require.Len(t, out.daemonSets, 1)
	spec := out.daemonSets[0].Spec.Template.Spec
	require.Len(t, spec.InitContainers, 1)
	require.Len(t, spec.Containers, 1)
	initC, npd := spec.InitContainers[0], spec.Containers[0]
	// NPD's container runs the image kubemedic-detect's is built on, so
	// the node pulls the shared layers once.
	require.Equal(t, detectBase, npd.Image, ".ko.yaml's base for kubemedic-detect and the DaemonSet's NPD image")
	detectName, _, _ := splitImage(initC.Image)
	require.Equal(t, "ghcr.io/kubemedic/kubemedic-detect", detectName)
	// ko puts the binary at /ko-app/<name>; the init container copies it
	// to the path the configs run, in a volume NPD's container mounts.
	require.Len(t, initC.Command, 3)
	require.True(t, path.IsAbs(initC.Command[0]), "cp by absolute path: ko sets the image's PATH")
	require.Equal(t, "cp", path.Base(initC.Command[0]))
	require.Equal(t, []string{"/ko-app/kubemedic-detect", plugin}, initC.Command[1:])
	mountOf := func(c corev1.Container, dir string) *corev1.VolumeMount {
		for i, vm := range c.VolumeMounts {
			if vm.MountPath == dir {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	dst, src := mountOf(initC, path.Dir(plugin)), mountOf(npd, path.Dir(plugin))
	require.NotNil(t, dst, "the init container does not mount %s", path.Dir(plugin))
	require.NotNil(t, src, "NPD's container does not mount %s", path.Dir(plugin))
	require.Equal(t, dst.Name, src.Name)
	require.True(t, src.ReadOnly, "NPD's container cannot change the plugin")
}

// TestPodSecurity checks every workload deploy/ renders. Deployments: the
// "restricted" Pod Security profile at pod and container level, a numeric
// non-root user, resources with a memory limit and no CPU limit, GOMEMLIMIT
// under the limit. The NPD DaemonSet: its init container likewise; its
// privileged container only what daemonset.yaml explains, each privilege
// named in the file's comments.
func TestPodSecurity(t *testing.T) {
	out := render(t, "deploy")
	require.Len(t, out.deployments, 3)
	for _, dep := range out.deployments {
		t.Run(dep.Name, func(t *testing.T) {
			pod := dep.Spec.Template.Spec
			require.False(t, pod.HostPID || pod.HostNetwork || pod.HostIPC)
			psc := pod.SecurityContext
			require.NotNil(t, psc)
			require.True(t, psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
			require.True(t, psc.RunAsUser != nil && *psc.RunAsUser != 0, "a numeric non-root user the kubelet can check")
			require.NotNil(t, psc.SeccompProfile)
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
			require.Empty(t, pod.InitContainers)
			for _, c := range pod.Containers {
				requireRestricted(t, c)
				requireResources(t, c)
				requireGOMEMLIMIT(t, c)
			}
		})
	}

	require.Len(t, out.daemonSets, 1)
	ds := out.daemonSets[0]
	pod := ds.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	for _, c := range pod.InitContainers {
		requireRestricted(t, c)
		requireResources(t, c)
	}
	require.False(t, pod.HostIPC)
	explained := string(readRepoFile(t, "deploy/npd/daemonset.yaml"))
	explained = strings.Join(regexp.MustCompile(`(?m)^\s*#.*$`).FindAllString(explained, -1), "\n")
	mustExplain := func(what string) {
		t.Helper()
		require.Contains(t, explained, what, "deploy/npd/daemonset.yaml takes %s without saying why in a comment", what)
	}
	if pod.HostPID {
		mustExplain("hostPID")
	}
	if pod.HostNetwork {
		mustExplain("hostNetwork")
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			mustExplain(v.HostPath.Path)
		}
	}
	for _, c := range pod.Containers {
		requireResources(t, c)
		sc := c.SecurityContext
		require.NotNil(t, sc, c.Name)
		if sc.Privileged != nil && *sc.Privileged {
			mustExplain("privileged")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			mustExplain("runAsUser 0")
		}
		require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s writes only to its volumes", c.Name)
		if sc.Capabilities != nil {
			require.Empty(t, sc.Capabilities.Add, "%s: privileged already has them; adding says nothing", c.Name)
		}
		for _, vm := range c.VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == vm.Name && v.HostPath != nil && !vm.ReadOnly {
					require.Equal(t, "/var/lib/kubemedic/detect", v.HostPath.Path, "%s: the state directory is the only writable host path", c.Name)
				}
			}
		}
	}
}

// requireRestricted checks a container against Pod Security's "restricted"
// profile, set on the container itself.
func requireRestricted(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	require.NotNil(t, sc, "%s has no securityContext", c.Name)
	require.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "%s: runAsNonRoot", c.Name)
	require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", c.Name)
	require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", c.Name)
	require.True(t, sc.Privileged == nil || !*sc.Privileged, "%s: not privileged", c.Name)
	require.NotNil(t, sc.Capabilities, c.Name)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: drop ALL", c.Name)
	require.Empty(t, sc.Capabilities.Add, c.Name)
	require.NotNil(t, sc.SeccompProfile, "%s: seccompProfile", c.Name)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, c.Name)
}

// requireResources checks requests and limits: a CPU and a memory request,
// a memory limit at least the request, and no CPU limit (CFS throttling of
// a busy leader costs it its Lease; a throttled NPD misses check timeouts).
func requireResources(t *testing.T, c corev1.Container) {
	t.Helper()
	r := c.Resources
	require.False(t, r.Requests.Cpu().IsZero(), "%s: a CPU request", c.Name)
	require.False(t, r.Requests.Memory().IsZero(), "%s: a memory request", c.Name)
	require.False(t, r.Limits.Memory().IsZero(), "%s: a memory limit", c.Name)
	require.GreaterOrEqual(t, r.Limits.Memory().Cmp(*r.Requests.Memory()), 0, "%s: limit under the request", c.Name)
	require.True(t, r.Limits.Cpu().IsZero(), "%s: no CPU limit", c.Name)
}

// requireGOMEMLIMIT checks that a Go container's GOMEMLIMIT is set, in MiB,
// and about 10% under its memory limit: the GC works harder near the limit
// instead of the container being OOM-killed.
func requireGOMEMLIMIT(t *testing.T, c corev1.Container) {
	t.Helper()
	var v string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			v = e.Value
		}
	}
	mib, ok := strings.CutSuffix(v, "MiB")
	require.True(t, ok, "%s: GOMEMLIMIT %q in MiB", c.Name, v)
	n, err := strconv.ParseInt(mib, 10, 64)
	require.NoError(t, err)
	limit := c.Resources.Limits.Memory()
	frac := float64(n<<20) / float64(limit.Value())
	require.True(t, frac >= 0.8 && frac <= 0.95, "%s: GOMEMLIMIT %s is %.0f%% of the limit %s; keep it about 10%% under", c.Name, v, 100*frac, limit)
}

// TestDisruptionBudgetsAndSpread checks availability through drains and
// node loss: the leader-elected controllers run two replicas spread over
// nodes (cordoned nodes not counted) and zones, under a budget that keeps
// one and never blocks a drain for a broken pod; no budget anywhere can
// block a drain forever; the single-writer alertbridge has none.
func TestDisruptionBudgetsAndSpread(t *testing.T) {
	out := render(t, "deploy")
	deps := map[string]appsv1.Deployment{}
	for _, d := range out.deployments {
		deps[d.Name] = d
	}
	budgets := func(d appsv1.Deployment) []policyv1.PodDisruptionBudget {
		var out2 []policyv1.PodDisruptionBudget
		for _, p := range out.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			require.NoError(t, err)
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				out2 = append(out2, p)
			}
		}
		return out2
	}
	for _, name := range []string{"kubemedic-remediator", "kubemedic-janitor"} {
		t.Run(name, func(t *testing.T) {
			d, ok := deps[name]
			require.True(t, ok)
			require.NotNil(t, d.Spec.Replicas)
			require.Equal(t, int32(2), *d.Spec.Replicas, "leader and standby")
			pdbs := budgets(d)
			require.Len(t, pdbs, 1)
			pdb := pdbs[0]
			require.NotNil(t, pdb.Spec.MinAvailable)
			require.Equal(t, 1, pdb.Spec.MinAvailable.IntValue())
			require.NotNil(t, pdb.Spec.UnhealthyPodEvictionPolicy)
			require.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy, "a broken replica never blocks a drain")

			spread := map[string]corev1.TopologySpreadConstraint{}
			for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
				spread[c.TopologyKey] = c
				sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
				require.NoError(t, err)
				require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s spreads pods it does not select", c.TopologyKey)
				require.Equal(t, int32(1), c.MaxSkew)
				require.NotNil(t, c.NodeTaintsPolicy)
				require.Equal(t, corev1.NodeInclusionPolicyHonor, *c.NodeTaintsPolicy,
					"cordoned nodes must not count, or kubemedic's own cordons leave a replica Pending")
			}
			require.Equal(t, corev1.DoNotSchedule, spread["kubernetes.io/hostname"].WhenUnsatisfiable, "never both on one node")
			require.Equal(t, corev1.ScheduleAnyway, spread["topology.kubernetes.io/zone"].WhenUnsatisfiable, "zones when there are some")
		})
	}

	ab, ok := deps["kubemedic-alertbridge"]
	require.True(t, ok)
	require.Equal(t, int32(1), *ab.Spec.Replicas, "one writer of the journal")
	require.Empty(t, budgets(ab), "one replica: a budget would block every drain or allow the eviction anyway")

	for _, p := range out.pdbs {
		var replicas int32
		for _, d := range deps {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			require.NoError(t, err)
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				replicas += *d.Spec.Replicas
			}
		}
		require.NotZero(t, replicas, "PodDisruptionBudget %s selects no Deployment", p.Name)
		if p.Spec.MinAvailable != nil {
			require.Less(t, int32(p.Spec.MinAvailable.IntValue()), replicas, "PodDisruptionBudget %s would block every drain", p.Name)
		}
	}
}
