package deploy_test

import (
	"context"
	"flag"
	"io"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

const namespace = "kubemedic-system"

// TestRemediatorRBAC pins the remediator's permissions to the reviewed list:
// a new verb or resource must be added here and to docs/operation-templates.md
// on purpose. It also fails on any wildcard.
func TestRemediatorRBAC(t *testing.T) {
	docs := splitDocs(t, "deploy/remediator/rbac.yaml", readRepoFile(t, "deploy/remediator/rbac.yaml"))
	got := map[string][]string{}
	var sa string
	for _, d := range docs {
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
			require.Equal(t, "kubemedic-remediator", b.RoleRef.Name)
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubemedic-remediator", Namespace: namespace}}, b.Subjects)
		default:
			t.Fatalf("unexpected %s %s in rbac.yaml", d.Obj.GetKind(), d.Obj.GetName())
		}
	}
	require.Equal(t, "kubemedic-remediator", sa)

	verbs := func(group, resource string, vs ...string) []string {
		var out []string
		for _, v := range vs {
			out = append(out, group+"/"+resource+":"+v)
		}
		return out
	}
	cluster := slices.Concat(
		verbs("", "nodes", "get", "list", "watch", "patch", "update"),
		verbs("", "nodes/status", "patch"),
		verbs("", "pods", "get", "list", "watch", "delete"),
		verbs("", "namespaces", "get"),
		verbs("", "pods/eviction", "create"),
		verbs("kubemedic.io", "remediationpolicies", "get", "list", "watch"),
		verbs("kubemedic.io", "remediationpolicies/status", "get", "update", "patch"),
		verbs("kubemedic.io", "nodeoperations", "get", "list", "watch", "create", "delete"),
		verbs("kubemedic.io", "nodeoperations/status", "get", "update", "patch"),
		verbs("kubemedic.io", "nodeoperationtemplates", "get", "list", "watch"),
		verbs("kubemedic.io", "validationpolicies", "get", "list", "watch"),
		verbs("kubemedic.io", "validationpolicies/status", "get", "update", "patch"),
		verbs("kubemedic.io", "nodevalidations", "get", "list", "watch", "create", "update"),
		verbs("kubemedic.io", "nodevalidations/status", "get", "update", "patch"),
		verbs("scheduling.k8s.io", "priorityclasses", "get"),
		verbs("cluster.x-k8s.io", "machines", "get", "list", "patch"),
		verbs("metal3.io", "baremetalhosts", "get", "patch"),
		verbs("resource.k8s.io", "resourceslices", "list"),
		verbs("resource.k8s.io", "devicetaintrules", "get", "list", "create", "update", "delete"),
		verbs("", "events", "create", "patch"),
		verbs("events.k8s.io", "events", "create", "patch"),
		// The diagnostics must-gather: the node's Events, the GPU
		// Operator's pods' logs.
		verbs("", "events", "list"),
		verbs("", "pods/log", "get"),
	)
	namespaced := slices.Concat(
		verbs("", "pods", "create"),
		verbs("", "configmaps", "get", "list", "watch", "create", "update"),
		verbs("", "secrets", "get"),
		verbs("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update"),
	)
	require.ElementsMatch(t, cluster, got["ClusterRole/kubemedic-remediator"])
	require.ElementsMatch(t, namespaced, got["Role/kubemedic-remediator"])
	require.Len(t, got, 2, "one ClusterRole and one Role")
}

// flattenRules turns RBAC rules into "group/resource:verb" strings and
// fails on wildcards, resource names and non-resource URLs.
func flattenRules(t *testing.T, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for i, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			for _, v := range list {
				require.NotContains(t, v, "*", "rule %d: no wildcards", i)
			}
		}
		require.Empty(t, r.NonResourceURLs, "rule %d", i)
		require.Empty(t, r.ResourceNames, "rule %d: resourceNames cannot narrow list, watch or create", i)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	return out
}

// remediatorFlags mirrors the flags of cmd/kubemedic-remediator, with
// their types and the same flag package, so that the Deployment's
// arguments are checked without building the binary too.
type remediatorFlags struct {
	fs                     *flag.FlagSet
	namespace, logLevel    string
	metricsAddr, probeAddr string
	leaderElect            bool
	retention              time.Duration
	// Slack: the token is a file from the kubemedic-slack Secret.
	slackTokenFile, slackAPIURL, slackDefaultChannel string
	set                                              map[string]bool
}

func parseRemediatorFlags(args []string) (*remediatorFlags, error) {
	f := &remediatorFlags{fs: flag.NewFlagSet("kubemedic-remediator", flag.ContinueOnError), set: map[string]bool{}}
	f.fs.SetOutput(io.Discard)
	f.fs.StringVar(&f.namespace, "namespace", "kubemedic-system", "")
	f.fs.BoolVar(&f.leaderElect, "leader-elect", true, "")
	f.fs.StringVar(&f.logLevel, "log-level", "info", "")
	f.fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "")
	f.fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "")
	f.fs.DurationVar(&f.retention, "retention", 168*time.Hour, "")
	f.fs.StringVar(&f.slackTokenFile, "slack-token-file", "", "")
	f.fs.StringVar(&f.slackAPIURL, "slack-api-url", "", "")
	f.fs.StringVar(&f.slackDefaultChannel, "slack-default-channel", "", "")
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	f.fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// remediatorDeployment reads the Deployment from deployment.yaml.
func remediatorDeployment(t *testing.T) (*appsv1.Deployment, []docObject) {
	t.Helper()
	docs := splitDocs(t, "deploy/remediator/deployment.yaml", readRepoFile(t, "deploy/remediator/deployment.yaml"))
	for _, d := range docs {
		if d.Obj.GetKind() == "Deployment" {
			var dep appsv1.Deployment
			decodeStrict(t, d, &dep)
			return &dep, docs
		}
	}
	t.Fatal("no Deployment in deploy/remediator/deployment.yaml")
	return nil, nil
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs replaces $(VAR) references the way the kubelet does, from the
// container's env, and fails on a reference to a variable the container
// does not define: the kubelet would pass it on literally.
func expandArgs(t *testing.T, c corev1.Container, values map[string]string) []string {
	t.Helper()
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	var out []string
	for _, a := range c.Args {
		out = append(out, envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			require.True(t, defined[name], "arg %q refers to $(%s), which the container does not define", a, name)
			v, ok := values[name]
			require.True(t, ok, "no test value for $(%s)", name)
			return v
		}))
	}
	return out
}

// TestRemediatorArgs checks that every argument of the remediator container
// is a --flag=value of kubemedic-remediator whose value parses, and that the
// ports, probes and replicas agree with it.
func TestRemediatorArgs(t *testing.T) {
	dep, _ := remediatorDeployment(t)
	require.Len(t, dep.Spec.Template.Spec.Containers, 1)
	c := dep.Spec.Template.Spec.Containers[0]
	require.Empty(t, c.Command, "the image's entrypoint is the binary")

	flagArg := regexp.MustCompile(`^--([a-z][a-z0-9-]*)=(\S+)$`)
	seen := map[string]bool{}
	for _, a := range c.Args {
		m := flagArg.FindStringSubmatch(a)
		require.NotNil(t, m, "arg %q is not --flag=value", a)
		require.False(t, seen[m[1]], "--%s given twice", m[1])
		seen[m[1]] = true
	}
	args := expandArgs(t, c, map[string]string{"POD_NAMESPACE": namespace})

	f, err := parseRemediatorFlags(args)
	require.NoError(t, err)
	require.Empty(t, f.fs.Args(), "no positional arguments")
	for _, name := range []string{"namespace", "leader-elect", "log-level", "metrics-bind-address", "health-probe-bind-address", "retention"} {
		require.True(t, f.set[name], "--%s is not set; set every flag explicitly", name)
	}

	require.Equal(t, namespace, f.namespace)
	require.Contains(t, c.Args, "--namespace=$(POD_NAMESPACE)", "operation pods go where the Role allows pods create")
	require.True(t, f.leaderElect, "more than one replica needs leader election")
	require.GreaterOrEqual(t, *dep.Spec.Replicas, int32(2))
	require.Contains(t, []string{"debug", "info", "error"}, f.logLevel, "a level name kubemedic-remediator accepts")
	require.GreaterOrEqual(t, f.retention, 24*time.Hour, "keep the audit record at least a day")
	// The Slack token is a file from the optional Secret kubemedic-slack
	// (shared with the janitor), never a flag value or an env value.
	require.NotEmpty(t, f.slackTokenFile)
	var tokenMount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(f.slackTokenFile, m.MountPath+"/") {
			tokenMount = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, tokenMount, "--slack-token-file %s is not in a mounted volume", f.slackTokenFile)
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == tokenMount.Name {
			require.NotNil(t, v.Secret, "the token volume is a Secret")
			require.Equal(t, "kubemedic-slack", v.Secret.SecretName)
			require.True(t, v.Secret.Optional != nil && *v.Secret.Optional, "the remediator runs without Slack: the Secret is optional")
		}
	}
	for _, a := range c.Args {
		require.NotContains(t, a, "xoxb-", "no token in the arguments")
	}

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
	require.Equal(t, ports["metrics"], portOf(f.metricsAddr))
	require.Equal(t, ports["health"], portOf(f.probeAddr))
	require.Equal(t, int32(8080), ports["metrics"])
	require.Equal(t, int32(8081), ports["health"])

	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe)
		require.NotNil(t, probe.HTTPGet)
		require.Equal(t, path, probe.HTTPGet.Path)
		require.Equal(t, "health", probe.HTTPGet.Port.String())
	}
}

// TestRemediatorBinaryAcceptsArgs runs the real kubemedic-remediator with
// the Deployment's arguments and --help: it must know every flag.
func TestRemediatorBinaryAcceptsArgs(t *testing.T) {
	dep, _ := remediatorDeployment(t)
	c := dep.Spec.Template.Spec.Containers[0]
	bin := harness.GoBuild(t, "./cmd/kubemedic-remediator")
	args := append(expandArgs(t, c, map[string]string{"POD_NAMESPACE": namespace}), "--help")
	out, _ := exec.Command(bin, args...).CombinedOutput()
	require.NotRegexp(t, `unknown flag|flag provided but not defined|invalid (argument|value)`, string(out))
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.Contains(t, string(out), name, "--help does not list --%s", name)
	}
}

// TestRemediatorPodSpec checks the security context, resources and
// disruption settings the deployment promises.
func TestRemediatorPodSpec(t *testing.T) {
	dep, docs := remediatorDeployment(t)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, "ghcr.io/kubemedic/kubemedic-remediator:v0.1.0", c.Image)
	require.Equal(t, "kubemedic-remediator", pod.ServiceAccountName)
	require.Equal(t, "system-cluster-critical", pod.PriorityClassName)
	require.False(t, pod.HostPID || pod.HostNetwork || pod.HostIPC)

	require.NotNil(t, pod.SecurityContext)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.RunAsUser, "runAsNonRoot needs a numeric user the kubelet can check")
	require.NotZero(t, *pod.SecurityContext.RunAsUser)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.True(t, *sc.ReadOnlyRootFilesystem)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.Nil(t, sc.Privileged)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Empty(t, sc.Capabilities.Add)

	// Sized from make bench-remediator's 183 MiB peak at 10,000 nodes
	// (docs/remediator.md "Scale"): the request covers it, the limit
	// leaves room for a relist, GOMEMLIMIT about 10% under the limit.
	limit, request := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
	require.GreaterOrEqual(t, request.Cmp(resource.MustParse("183Mi")), 0, "memory request %s under the measured peak", request)
	require.True(t, limit.Equal(resource.MustParse("320Mi")), "memory limit %s", limit)
	require.True(t, request.Equal(resource.MustParse("200Mi")), "memory request %s", request)
	require.False(t, c.Resources.Requests.Cpu().IsZero(), "a CPU request")
	require.True(t, c.Resources.Limits.Cpu().IsZero(), "no CPU limit: throttling costs the leader its Lease")
	requireGOMEMLIMIT(t, c)

	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.Obj.GetKind())
		switch d.Obj.GetKind() {
		case "PodDisruptionBudget":
			var pdb policyv1.PodDisruptionBudget
			decodeStrict(t, d, &pdb)
			require.Equal(t, "1", pdb.Spec.MinAvailable.String(), "one replica stays through a drain")
			require.Equal(t, dep.Spec.Selector, pdb.Spec.Selector)
		case "Service":
			var svc corev1.Service
			decodeStrict(t, d, &svc)
			require.Equal(t, dep.Spec.Selector.MatchLabels, svc.Spec.Selector)
			require.Len(t, svc.Spec.Ports, 1)
			require.Equal(t, "metrics", svc.Spec.Ports[0].TargetPort.String())
		}
	}
	require.ElementsMatch(t, []string{"Deployment", "Service", "PodDisruptionBudget"}, kinds)
}

// TestManifestsApply renders deploy/remediator, deploy/alertbridge, and
// deploy (remediator, node-problem-detector and alertbridge together), with
// kustomize and applies them to a
// real API server in server-side dry-run mode, which runs the API's own
// validation: the CRDs' schemas and CEL rules on the NodeOperationTemplates,
// the Deployment, Service, PodDisruptionBudget and RBAC.
func TestManifestsApply(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	// A dry run creates nothing, so the namespaced objects need the
	// namespace to exist already.
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	kubectl := filepath.Join(env.BinDir, "kubectl")

	remediator := []string{
		"Namespace/kubemedic-system",
		"CustomResourceDefinition/nodeoperations.kubemedic.io",
		"CustomResourceDefinition/nodeoperationtemplates.kubemedic.io",
		"CustomResourceDefinition/remediationpolicies.kubemedic.io",
		"ServiceAccount/kubemedic-remediator",
		"ClusterRole/kubemedic-remediator",
		"ClusterRoleBinding/kubemedic-remediator",
		"Role/kubemedic-remediator",
		"RoleBinding/kubemedic-remediator",
		"Deployment/kubemedic-remediator",
		"Service/kubemedic-remediator-metrics",
		"PodDisruptionBudget/kubemedic-remediator",
		"NodeOperationTemplate/reset-gpu",
		"NodeOperationTemplate/reboot",
		"NodeOperationTemplate/restart-kubelet",
		"NodeOperationTemplate/remount-nfs",
		"NodeOperationTemplate/drain-only",
		"NodeOperationTemplate/restart-device-plugin",
		"NodeOperationTemplate/reapply-mig-config",
		"NodeOperationTemplate/restart-containerd",
	}
	npd := []string{
		"ServiceAccount/kubemedic-npd",
		"ClusterRole/kubemedic-npd",
		"ClusterRoleBinding/kubemedic-npd",
		"DaemonSet/kubemedic-npd",
		"ConfigMap/kubemedic-npd-config-", // a name prefix: kustomize appends a hash
	}
	alertbridge := []string{
		"ServiceAccount/kubemedic-alertbridge",
		"PersistentVolumeClaim/kubemedic-alertbridge-state",
		"Deployment/kubemedic-alertbridge",
		"Service/kubemedic-alertbridge",
		"ConfigMap/kubemedic-alertbridge-config-",
	}
	for _, tc := range []struct {
		dir        string
		want       []string
		namespaces int // Namespace objects: only deploy/remediator makes one
	}{
		{"deploy/remediator", remediator, 1},
		{"deploy/alertbridge", alertbridge, 0},
		{"deploy", slices.Concat(remediator, npd, alertbridge), 1},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			rendered := kustomize(t, kubectl, tc.dir)
			checkRendered(t, rendered, tc.namespaces)

			for _, mode := range [][]string{{}, {"--server-side"}} {
				args := slices.Concat([]string{"--kubeconfig", env.Kubeconfig, "apply", "--dry-run=server", "-o", "yaml"}, mode, []string{"-f", "-"})
				apply := exec.Command(kubectl, args...)
				apply.Stdin = strings.NewReader(string(rendered))
				var stderr strings.Builder
				apply.Stderr = &stderr
				out, err := apply.Output()
				require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), stderr.String())

				// What the server would store.
				var list struct {
					Items []map[string]any `json:"items"`
				}
				require.NoError(t, yaml.Unmarshal(out, &list))
				got := map[string]bool{}
				for _, item := range list.Items {
					u := unstructured.Unstructured{Object: item}
					got[u.GetKind()+"/"+u.GetName()] = true
					if u.GetKind() == "NodeOperationTemplate" {
						// kustomize's namespace transformer cannot know that a
						// custom kind is cluster-scoped; the server drops it.
						require.Empty(t, u.GetNamespace(), "%s stored with a namespace", u.GetName())
					}
				}
				for _, want := range tc.want {
					found := got[want]
					for k := range got {
						found = found || strings.HasSuffix(want, "-") && strings.HasPrefix(k, want)
					}
					require.True(t, found, "kubectl %v did not apply %s; it applied %v", mode, want, slices.Sorted(maps.Keys(got)))
				}
			}
		})
	}
}

// checkRendered checks a kustomize output: wantNamespaces Namespace objects, every
// namespaced kubemedic object in kubemedic-system, cluster-scoped ones in
// none, and no wildcard in any role.
func checkRendered(t *testing.T, rendered []byte, wantNamespaces int) {
	t.Helper()
	docs := splitDocs(t, "kustomize output", rendered)
	clusterScoped := map[string]bool{
		"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"PriorityClass": true,
	}
	// kustomize does not know the scope of custom kinds and gives them the
	// kustomization's namespace too; the API server drops it (checked on
	// what the server would store, in TestManifestsApply).
	customClusterScoped := map[string]bool{"NodeOperationTemplate": true}
	namespaces := 0
	seen := map[string]bool{}
	for _, d := range docs {
		kind, name := d.Obj.GetKind(), d.Obj.GetName()
		id := kind + "/" + d.Obj.GetNamespace() + "/" + name
		require.False(t, seen[id], "%s twice", id)
		seen[id] = true
		if kind == "Namespace" {
			namespaces++
			require.Equal(t, namespace, name)
		}
		switch {
		case customClusterScoped[kind]:
		case clusterScoped[kind]:
			require.Empty(t, d.Obj.GetNamespace(), "%s %s is cluster-scoped", kind, name)
		default:
			require.Equal(t, namespace, d.Obj.GetNamespace(), "%s %s", kind, name)
		}
		switch kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			decodeStrict(t, d, &r)
			flattenRules(t, r.Rules)
		case "Role":
			var r rbacv1.Role
			decodeStrict(t, d, &r)
			flattenRules(t, r.Rules)
		}
	}
	require.Equal(t, wantNamespaces, namespaces, "Namespace objects")
}

// TestInstallFresh installs kubemedic the documented way on an API server
// without kubemedic's CRDs: the CRDs first (a NodeOperationTemplate cannot
// be applied in the same run as its CRD), then a server-side dry run of
// deploy/ and of the example overlay (serverDryRun), then everything, for
// real. The templates end up cluster-scoped and as written.
func TestInstallFresh(t *testing.T) {
	env := harness.Start(t, localcluster.Options{CRDDir: "-"})
	kubectl := filepath.Join(env.BinDir, "kubectl")
	root := repoRoot(t)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...).CombinedOutput()
		require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	}
	run("apply", "-k", filepath.Join(root, "deploy/crds"))
	run("wait", "--for=condition=Established", "--timeout=60s", "crd/nodeoperationtemplates.kubemedic.io")
	t.Run("server dry run", func(t *testing.T) { serverDryRun(t, env) })
	run("apply", "-k", filepath.Join(root, "deploy"))

	// The bindings reach the ServiceAccount, and only as far as intended.
	sa := "system:serviceaccount:" + namespace + ":kubemedic-remediator"
	for _, tc := range []struct {
		verb, resource, ns string
		allowed            bool
	}{
		{"create", "pods", namespace, true},
		{"create", "pods", "default", false},
		{"list", "pods", "", true},
		{"create", "pods/eviction", "default", true},
		{"patch", "nodes", "", true},
		{"update", "configmaps", namespace, true},
		{"update", "configmaps", "default", false},
		{"update", "leases.coordination.k8s.io", namespace, true},
		{"create", "nodeoperations.kubemedic.io", "", true},
		{"update", "nodeoperations.kubemedic.io", "", false},
		{"update", "nodeoperationtemplates.kubemedic.io", "", false},
		{"get", "secrets", namespace, true},
		{"get", "secrets", "default", false},
		{"list", "secrets", namespace, false},
		{"create", "pods/exec", namespace, false},
		{"get", "nodes/proxy", "", false},
	} {
		res, sub, _ := strings.Cut(tc.resource, "/")
		args := []string{"--kubeconfig", env.Kubeconfig, "auth", "can-i", tc.verb, res, "--subresource=" + sub, "--as", sa}
		if tc.ns != "" {
			args = append(args, "-n", tc.ns)
		}
		out, _ := exec.Command(kubectl, args...).Output() // exits 1 for "no"
		want := map[bool]string{true: "yes", false: "no"}[tc.allowed]
		require.Equal(t, want, strings.TrimSpace(string(out)), "can-i %s %s in %q", tc.verb, tc.resource, tc.ns)
	}

	// Other projects' kinds, not served here (kubectl auth can-i needs them
	// served to resolve the name): asked of the authorizer directly.
	for _, tc := range []struct {
		verb, group, resource, ns string
		allowed                   bool
	}{
		{"patch", "cluster.x-k8s.io", "machines", "capi", true},
		{"delete", "cluster.x-k8s.io", "machines", "capi", false},
		{"patch", "metal3.io", "baremetalhosts", "metal3", true},
		{"update", "metal3.io", "baremetalhosts", "metal3", false},
		{"create", "resource.k8s.io", "devicetaintrules", "", true},
		{"delete", "resource.k8s.io", "resourceslices", "", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Group: tc.group, Resource: tc.resource, Namespace: tc.ns}}}
		got, err := env.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, tc.allowed, got.Status.Allowed, "%s %s.%s in %q: %s", tc.verb, tc.resource, tc.group, tc.ns, got.Status.Reason)
	}

	var tpls v1alpha1.NodeOperationTemplateList
	require.NoError(t, env.Client.List(context.Background(), &tpls))
	var names []string
	for _, tpl := range tpls.Items {
		names = append(names, tpl.Name)
		require.Empty(t, tpl.Namespace)
	}
	require.ElementsMatch(t, []string{"reset-gpu", "reboot", "restart-kubelet", "remount-nfs", "drain-only",
		"restart-device-plugin", "reapply-mig-config", "restart-containerd", "collect-gpu-diagnostics",
		"validate-dcgm", "validate-nccl", "validate-nvbandwidth"}, names)

	var want v1alpha1.NodeOperationTemplate
	for _, d := range splitDocs(t, templatesDeploy, readRepoFile(t, templatesDeploy)) {
		if d.Obj.GetName() == "reboot" {
			decodeStrict(t, d, &want)
		}
	}
	for _, tpl := range tpls.Items {
		if tpl.Name == "reboot" {
			require.Equal(t, want.Spec.Args, tpl.Spec.Args, "the script is stored as written")
		}
	}
}
