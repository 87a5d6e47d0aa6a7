package deploy_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

const (
	janitorDir  = "deploy/janitor"
	janitorName = "kubemedic-janitor"
	// janitorSlackSecret holds the Slack bot token under the key token.
	janitorSlackSecret = "kubemedic-slack"
)

// TestJanitorRBAC pins the janitor's permissions to the reviewed list: a
// new verb or resource must be added here on purpose, with its reason in
// deploy/janitor/rbac.yaml. It also fails on any wildcard, resource name or
// non-resource URL (flattenRules).
func TestJanitorRBAC(t *testing.T) {
	rel := path.Join(janitorDir, "rbac.yaml")
	got := map[string][]string{}
	var sa string
	for _, d := range splitDocs(t, rel, readRepoFile(t, rel)) {
		switch d.Obj.GetKind() {
		case "ServiceAccount":
			sa = d.Obj.GetName()
		case "ClusterRole":
			var r rbacv1.ClusterRole
			decodeStrict(t, d, &r)
			require.Nil(t, r.AggregationRule, "an aggregated role grants whatever matches its selector")
			got["ClusterRole/"+r.Name] = flattenRules(t, r.Rules)
		case "Role":
			var r rbacv1.Role
			decodeStrict(t, d, &r)
			got["Role/"+r.Name] = flattenRules(t, r.Rules)
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding // same shape as a ClusterRoleBinding
			decodeStrict(t, d, &b)
			require.Equal(t, rbacv1.GroupName, b.RoleRef.APIGroup)
			require.Equal(t, strings.TrimSuffix(d.Obj.GetKind(), "Binding"), b.RoleRef.Kind)
			require.Equal(t, janitorName, b.RoleRef.Name)
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: janitorName, Namespace: namespace}}, b.Subjects)
		default:
			t.Fatalf("unexpected %s %s in %s", d.Obj.GetKind(), d.Obj.GetName(), rel)
		}
	}
	require.Equal(t, janitorName, sa)

	verbs := func(group, resource string, vs ...string) []string {
		var out []string
		for _, v := range vs {
			out = append(out, group+"/"+resource+":"+v)
		}
		return out
	}
	read := []string{"get", "list", "watch"}
	cluster := slices.Concat(
		verbs("", "pods", "get", "list", "watch", "patch", "delete"),
		verbs("", "namespaces", read...),
		verbs("apps", "replicasets", read...),
		verbs("apps", "daemonsets", read...),
		verbs("apps", "deployments", "get", "list", "watch", "patch"),
		verbs("apps", "statefulsets", "get", "list", "watch", "patch"),
		verbs("batch", "jobs", "get", "list", "watch", "delete"),
		verbs("kubeflow.org", "notebooks", "patch"),
		verbs("kubemedic.io", "clusterreclaimpolicies", read...),
		verbs("kubemedic.io", "reclaimpolicies", "get", "list", "watch", "patch"),
		verbs("events.k8s.io", "events", "create", "patch"),
	)
	namespaced := slices.Concat(
		verbs("coordination.k8s.io", "leases", "get", "create", "update"),
		verbs("", "events", "create", "patch"),
	)
	require.ElementsMatch(t, cluster, got["ClusterRole/"+janitorName])
	require.ElementsMatch(t, namespaced, got["Role/"+janitorName])
	require.Len(t, got, 2, "one ClusterRole and one Role")
}

// janitorObjects are the objects of deploy/janitor/deployment.yaml.
type janitorObjects struct {
	dep *appsv1.Deployment
	svc *corev1.Service
	pdb *policyv1.PodDisruptionBudget
}

func readJanitor(t *testing.T) janitorObjects {
	t.Helper()
	rel := path.Join(janitorDir, "deployment.yaml")
	var o janitorObjects
	for _, d := range splitDocs(t, rel, readRepoFile(t, rel)) {
		switch d.Obj.GetKind() {
		case "Deployment":
			o.dep = &appsv1.Deployment{}
			decodeStrict(t, d, o.dep)
		case "Service":
			o.svc = &corev1.Service{}
			decodeStrict(t, d, o.svc)
		case "PodDisruptionBudget":
			o.pdb = &policyv1.PodDisruptionBudget{}
			decodeStrict(t, d, o.pdb)
		default:
			// A Secret in particular: the Slack token is never in git.
			t.Fatalf("%s: unexpected %s %s", rel, d.Obj.GetKind(), d.Obj.GetName())
		}
	}
	require.NotNil(t, o.dep, "a Deployment")
	require.NotNil(t, o.svc, "a Service")
	require.NotNil(t, o.pdb, "a PodDisruptionBudget")
	require.Len(t, o.dep.Spec.Template.Spec.Containers, 1)
	return o
}

// janitorArgs splits the container's arguments into flag name and value,
// after expanding $(POD_NAMESPACE); each must be --flag=value, given once.
func janitorArgs(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	flagArg := regexp.MustCompile(`^--([a-z][a-z0-9-]*)=(\S+)$`)
	out := map[string]string{}
	for _, a := range expandArgs(t, c, map[string]string{"POD_NAMESPACE": namespace}) {
		m := flagArg.FindStringSubmatch(a)
		require.NotNil(t, m, "arg %q is not --flag=value", a)
		_, dup := out[m[1]]
		require.False(t, dup, "--%s given twice", m[1])
		out[m[1]] = m[2]
	}
	return out
}

// janitorHelpFlags builds kubemedic-janitor and returns the flags its
// --help lists: the binary, not a copy of its flag list, is the truth.
func janitorHelpFlags(t *testing.T) (bin string, flags map[string]bool) {
	t.Helper()
	bin = harness.GoBuild(t, "./cmd/kubemedic-janitor")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, "kubemedic-janitor --help:\n%s", out)
	flags = map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["prometheus-url"] && flags["slack-token-file"], "could not read the flags from --help:\n%s", out)
	return bin, flags
}

// TestJanitorArgs checks that every argument of the janitor container is a
// flag the real kubemedic-janitor accepts with a value it parses, that the
// values agree with the ports, probes, replicas and the Slack volume, and
// that the Slack token is never a flag or environment value.
func TestJanitorArgs(t *testing.T) {
	o := readJanitor(t)
	pod := o.dep.Spec.Template.Spec
	c := pod.Containers[0]
	require.Empty(t, c.Command, "the image's entrypoint is the binary")
	args := janitorArgs(t, c)

	bin, accepted := janitorHelpFlags(t)
	for name := range args {
		require.True(t, accepted[name], "--%s is not a flag of kubemedic-janitor (it has %v)", name, accepted)
	}
	// The values parse: the flag package stops at the first bad one, and
	// --help then exits 0 without starting anything.
	out, _ := exec.Command(bin, append(expandArgs(t, c, map[string]string{"POD_NAMESPACE": namespace}), "--help")...).CombinedOutput()
	require.NotRegexp(t, `flag provided but not defined|invalid (argument|value)`, string(out))

	for _, name := range []string{"namespace", "leader-elect", "log-level", "metrics-bind-address", "health-probe-bind-address",
		"prometheus-url", "metrics-staleness", "interval", "slack-token-file"} {
		require.Contains(t, args, name, "--%s is not set; set it explicitly", name)
	}
	require.Contains(t, c.Args, "--namespace=$(POD_NAMESPACE)", "the Lease goes where the Role allows it")
	require.Equal(t, "true", args["leader-elect"], "more than one replica needs leader election")
	require.GreaterOrEqual(t, *o.dep.Spec.Replicas, int32(2))
	require.Contains(t, []string{"debug", "info", "error"}, args["log-level"])

	u, err := url.Parse(args["prometheus-url"])
	require.NoError(t, err)
	require.Contains(t, []string{"http", "https"}, u.Scheme)
	require.NotEmpty(t, u.Host)
	require.Nil(t, u.User, "no credentials in the Prometheus URL")
	staleness, err := time.ParseDuration(args["metrics-staleness"])
	require.NoError(t, err)
	interval, err := time.ParseDuration(args["interval"])
	require.NoError(t, err)
	require.Positive(t, staleness)
	require.Positive(t, interval)
	require.Less(t, interval, 10*time.Minute, "KubemedicJanitorStalled fires after 10 minutes without a cycle")

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	portOf := func(addr string) int32 {
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err, "address %q", addr)
		n, err := strconv.ParseInt(p, 10, 32)
		require.NoError(t, err, "address %q", addr)
		return int32(n)
	}
	require.Equal(t, int32(8080), ports["metrics"])
	require.Equal(t, int32(8081), ports["health"])
	require.Equal(t, ports["metrics"], portOf(args["metrics-bind-address"]))
	require.Equal(t, ports["health"], portOf(args["health-probe-bind-address"]))
	for probe, p := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe)
		require.NotNil(t, probe.HTTPGet)
		require.Equal(t, p, probe.HTTPGet.Path)
		require.Equal(t, "health", probe.HTTPGet.Port.String())
	}

	// The token file is the key token of the Slack Secret, mounted
	// read-only and required (deployment.yaml says why).
	tokenFile := args["slack-token-file"]
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if path.Dir(tokenFile) == m.MountPath {
			mount = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, mount, "no volume is mounted at %s", path.Dir(tokenFile))
	require.True(t, mount.ReadOnly)
	var vol *corev1.Volume
	for i, v := range pod.Volumes {
		if v.Name == mount.Name {
			vol = &pod.Volumes[i]
		}
	}
	require.NotNil(t, vol)
	require.NotNil(t, vol.Secret, "the token comes from a Secret")
	require.Equal(t, janitorSlackSecret, vol.Secret.SecretName)
	require.False(t, vol.Secret.Optional == nil || *vol.Secret.Optional, "the Slack Secret is required: optional: false")
	require.Equal(t, []corev1.KeyToPath{{Key: "token", Path: path.Base(tokenFile)}}, vol.Secret.Items)
	require.NotNil(t, vol.Secret.DefaultMode)
	require.Zero(t, *vol.Secret.DefaultMode&0o007, "the token is not world-readable")

	// The token itself is never a flag or environment value: flags and env
	// show in the pod spec (and flags in ps).
	slackToken := regexp.MustCompile(`xox[a-z]-`)
	for _, a := range c.Args {
		require.NotRegexp(t, slackToken, a)
	}
	for name := range args {
		require.False(t, strings.Contains(name, "token") && name != "slack-token-file", "--%s: only a token file, never a token, is a flag", name)
	}
	require.False(t, accepted["slack-token"], "kubemedic-janitor must not take the token as a flag")
	for _, e := range c.Env {
		require.NotRegexp(t, slackToken, e.Value, "env %s", e.Name)
		require.NotEqual(t, "KUBEMEDIC_SLACK_TOKEN", e.Name, "the token is a file (--slack-token-file), not an environment variable")
	}
	require.Empty(t, c.EnvFrom, "no Secret as environment")
}

// TestJanitorPodSpec checks the security context, resources, the metrics
// Service and the disruption budget.
func TestJanitorPodSpec(t *testing.T) {
	o := readJanitor(t)
	pod := o.dep.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, "ghcr.io/kubemedic/kubemedic-janitor:v0.1.0", c.Image)
	require.Equal(t, janitorName, pod.ServiceAccountName)
	require.False(t, pod.HostPID || pod.HostNetwork || pod.HostIPC)

	require.NotNil(t, pod.SecurityContext)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.RunAsUser, "runAsNonRoot needs a numeric user the kubelet can check")
	require.NotZero(t, *pod.SecurityContext.RunAsUser)
	require.NotNil(t, pod.SecurityContext.FSGroup, "the Secret file (mode 0440) is readable by the pod's group")
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.True(t, *sc.ReadOnlyRootFilesystem)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.Nil(t, sc.Privileged)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Empty(t, sc.Capabilities.Add)

	// The goal: a working set under 250 MiB at 50,000 GPU pods.
	limit, request := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
	require.False(t, limit.IsZero(), "a memory limit")
	require.LessOrEqual(t, request.Cmp(resource.MustParse("256Mi")), 0, "memory request %s", request)
	require.Equal(t, 1, limit.Cmp(*request), "the limit leaves room for a relist")
	require.False(t, c.Resources.Requests.Cpu().IsZero(), "a CPU request")
	require.True(t, c.Resources.Limits.Cpu().IsZero(), "no CPU limit: throttling costs the leader its Lease")
	var gomemlimit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomemlimit = e.Value
		}
	}
	mib, ok := strings.CutSuffix(gomemlimit, "MiB")
	require.True(t, ok, "GOMEMLIMIT %q in MiB", gomemlimit)
	n, err := strconv.ParseInt(mib, 10, 64)
	require.NoError(t, err)
	frac := float64(n<<20) / float64(limit.Value())
	require.True(t, frac >= 0.8 && frac <= 0.95, "GOMEMLIMIT %s is %.0f%% of the limit %s; keep it about 10%% under", gomemlimit, 100*frac, limit)

	require.Equal(t, o.dep.Spec.Selector.MatchLabels, o.svc.Spec.Selector)
	require.Equal(t, o.dep.Spec.Template.Labels, o.svc.Labels, "the ServiceMonitor selects the Service by these labels")
	require.Len(t, o.svc.Spec.Ports, 1)
	require.Equal(t, "metrics", o.svc.Spec.Ports[0].Name)
	require.Equal(t, "metrics", o.svc.Spec.Ports[0].TargetPort.String())
	require.Equal(t, "1", o.pdb.Spec.MinAvailable.String(), "one replica stays through a drain")
	require.Equal(t, o.dep.Spec.Selector, o.pdb.Spec.Selector)
}

// TestJanitorAlertsReadExportedMetrics checks that every kubemedic_janitor_*
// metric the alerts read is one the janitor's code defines, and that the
// alerts' job label is the janitor's metrics Service (prometheus-operator
// names the job after the Service).
func TestJanitorAlertsReadExportedMetrics(t *testing.T) {
	rules := string(readRepoFile(t, "deploy/prometheus/prometheusrule.yaml"))
	defined := map[string]bool{}
	root := repoRoot(t)
	lit := regexp.MustCompile(`"(kubemedic_janitor_[a-z0-9_]+)"`)
	err := filepath.WalkDir(filepath.Join(root, "janitor"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return err
	})
	require.NoError(t, err)
	used := regexp.MustCompile(`\bkubemedic_janitor_[a-z0-9_]+`).FindAllString(rules, -1)
	require.NotEmpty(t, used)
	for _, m := range used {
		require.True(t, defined[m], "an alert reads %s, which the janitor does not define", m)
	}
	for _, alert := range []string{"KubemedicJanitorGPUMetricsUnreadable", "KubemedicJanitorNoticesFailing", "KubemedicJanitorStalled"} {
		require.Contains(t, rules, "alert: "+alert+"\n")
	}
	o := readJanitor(t)
	for _, m := range regexp.MustCompile(`job="(kubemedic-janitor[^"]*)"`).FindAllStringSubmatch(rules, -1) {
		require.Equal(t, o.svc.Name, m[1], "the job of the janitor's metrics is its Service's name")
	}
}

// TestJanitorManifestsApply renders deploy/janitor and deploy (which must
// include it), applies deploy/janitor to a real API server that has the
// CRDs (server-side dry run, client- and server-side apply, then for
// real), and checks with `kubectl auth can-i --as` that the bindings give
// the janitor's ServiceAccount what it needs and no more.
func TestJanitorManifestsApply(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	kubectl := filepath.Join(env.BinDir, "kubectl")

	want := []string{
		"ServiceAccount/" + janitorName,
		"ClusterRole/" + janitorName,
		"ClusterRoleBinding/" + janitorName,
		"Role/" + janitorName,
		"RoleBinding/" + janitorName,
		"Deployment/" + janitorName,
		"Service/kubemedic-janitor-metrics",
		"Service/kubemedic-janitor-slack",
		"PodDisruptionBudget/" + janitorName,
	}
	rendered := kustomize(t, kubectl, janitorDir)
	checkRendered(t, rendered, 0)
	var kinds []string
	for _, d := range splitDocs(t, "kustomize "+janitorDir, rendered) {
		kinds = append(kinds, d.Obj.GetKind()+"/"+d.Obj.GetName())
		require.Equal(t, "kubemedic", d.Obj.GetLabels()["app.kubernetes.io/part-of"])
	}
	require.ElementsMatch(t, want, kinds, "and no Secret: the Slack token is never in git")

	inDeploy := map[string]bool{}
	for _, d := range splitDocs(t, "kustomize deploy", kustomize(t, kubectl, "deploy")) {
		inDeploy[d.Obj.GetKind()+"/"+d.Obj.GetName()] = true
	}
	for _, w := range want {
		require.True(t, inDeploy[w], "deploy/kustomization.yaml does not include %s", w)
	}

	run := func(stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(string(stdin))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), stderr.String())
		return out
	}
	for _, mode := range [][]string{{}, {"--server-side"}} {
		out := run(rendered, slices.Concat([]string{"apply", "--dry-run=server", "-o", "yaml"}, mode, []string{"-f", "-"})...)
		var list struct {
			Items []map[string]any `json:"items"`
		}
		require.NoError(t, yaml.Unmarshal(out, &list))
		var got []string
		for _, item := range list.Items {
			u := unstructured.Unstructured{Object: item}
			got = append(got, u.GetKind()+"/"+u.GetName())
		}
		require.ElementsMatch(t, want, got, "kubectl apply --dry-run=server %v", mode)
	}
	run(nil, "apply", "-k", filepath.Join(repoRoot(t), janitorDir))
	// kubectl auth can-i resolves a resource through discovery and asks
	// about no group at all for one the server does not serve: Kubeflow's
	// Notebook must exist for its check to mean anything.
	run([]byte(notebookCRD), "apply", "-f", "-")
	run(nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/notebooks.kubeflow.org")

	sa := "system:serviceaccount:" + namespace + ":" + janitorName
	for _, tc := range []struct {
		verb, resource, ns string
		allowed            bool
	}{
		{"list", "pods", "", true},
		{"watch", "pods", "", true},
		{"get", "pods", "research", true},
		{"patch", "pods", "research", true},
		{"delete", "pods", "research", true},
		{"list", "namespaces", "", true},
		{"watch", "replicasets.apps", "", true},
		{"watch", "daemonsets.apps", "", true},
		{"get", "deployments.apps", "research", true},
		{"patch", "deployments.apps", "research", true},
		{"patch", "statefulsets.apps", "research", true},
		{"delete", "jobs.batch", "research", true},
		{"patch", "notebooks.kubeflow.org", "research", true},
		{"list", "clusterreclaimpolicies.kubemedic.io", "", true},
		{"watch", "reclaimpolicies.kubemedic.io", "", true},
		{"patch", "reclaimpolicies.kubemedic.io", "research", true},
		{"create", "events.events.k8s.io", "research", true},
		{"patch", "events.events.k8s.io", "research", true},
		{"create", "events", namespace, true},
		{"update", "leases.coordination.k8s.io", namespace, true},
		{"create", "leases.coordination.k8s.io", namespace, true},

		{"create", "pods", "research", false},
		{"create", "pods", namespace, false},
		{"update", "pods", "research", false},
		{"create", "pods/eviction", "research", false},
		{"create", "pods/exec", "research", false},
		{"delete", "deployments.apps", "research", false},
		{"update", "deployments.apps", "research", false},
		{"patch", "deployments.apps/scale", "research", false},
		{"update", "statefulsets.apps/scale", "research", false},
		{"delete", "statefulsets.apps", "research", false},
		{"patch", "replicasets.apps", "research", false},
		{"delete", "daemonsets.apps", "research", false},
		{"create", "jobs.batch", "research", false},
		{"patch", "jobs.batch", "research", false},
		{"delete", "notebooks.kubeflow.org", "research", false},
		{"update", "clusterreclaimpolicies.kubemedic.io", "", false},
		{"patch", "clusterreclaimpolicies.kubemedic.io", "", false},
		{"update", "reclaimpolicies.kubemedic.io", "research", false},
		{"patch", "reclaimpolicies.kubemedic.io/status", "research", false},
		{"delete", "namespaces", "", false},
		{"get", "secrets", namespace, false},
		{"list", "secrets", "research", false},
		{"patch", "nodes", "", false},
		{"create", "events", "research", false},
		{"update", "leases.coordination.k8s.io", "research", false},
		{"delete", "leases.coordination.k8s.io", namespace, false},
	} {
		res, sub, _ := strings.Cut(tc.resource, "/")
		args := []string{"--kubeconfig", env.Kubeconfig, "auth", "can-i", tc.verb, res, "--subresource=" + sub, "--as", sa}
		if tc.ns != "" {
			args = append(args, "-n", tc.ns)
		} else {
			args = append(args, "--all-namespaces")
		}
		out, _ := exec.Command(kubectl, args...).Output() // exits 1 for "no"
		want := map[bool]string{true: "yes", false: "no"}[tc.allowed]
		require.Equal(t, want, strings.TrimSpace(string(out)), "can-i %s %s in %q", tc.verb, tc.resource, tc.ns)
	}
}

// notebookCRD stands in for Kubeflow's Notebook CRD: the group, kind and
// scope are Kubeflow's, the schema is left open.
const notebookCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: notebooks.kubeflow.org
spec:
  group: kubeflow.org
  scope: Namespaced
  names:
    kind: Notebook
    plural: notebooks
    singular: notebook
    listKind: NotebookList
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`
