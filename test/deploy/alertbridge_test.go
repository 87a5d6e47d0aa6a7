package deploy_test

import (
	"flag"
	"io"
	"net"
	"net/url"
	"os/exec"
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
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/test/harness"
)

const alertbridgeDir = "deploy/alertbridge"

// alertbridgeFlags mirrors the flags of cmd/kubemedic-alertbridge, with
// their types, so that the Deployment's arguments are checked without
// building the binary (TestAlertbridgeBinaryAcceptsArgs runs the real one).
type alertbridgeFlags struct {
	fs                                     *flag.FlagSet
	config, listen, stateDir               string
	bearerFile, basicUserFile, basicPwFile string
	insecure                               bool
	githubURL, githubTokenFile, appKeyFile string
	appID, installationID, maxBody         int64
	dryRun                                 bool
	logLevel                               string
	set                                    map[string]bool
}

func parseAlertbridgeFlags(args []string) (*alertbridgeFlags, error) {
	f := &alertbridgeFlags{fs: flag.NewFlagSet("kubemedic-alertbridge", flag.ContinueOnError), set: map[string]bool{}}
	f.fs.SetOutput(io.Discard)
	f.fs.StringVar(&f.config, "config", "/etc/kubemedic/alertbridge/config.yaml", "")
	f.fs.StringVar(&f.listen, "listen", ":8080", "")
	f.fs.StringVar(&f.stateDir, "state-dir", "/var/lib/kubemedic-alertbridge", "")
	f.fs.StringVar(&f.bearerFile, "auth-bearer-token-file", "", "")
	f.fs.StringVar(&f.basicUserFile, "auth-basic-username-file", "", "")
	f.fs.StringVar(&f.basicPwFile, "auth-basic-password-file", "", "")
	f.fs.BoolVar(&f.insecure, "insecure-no-auth", false, "")
	f.fs.StringVar(&f.githubURL, "github-url", "https://api.github.com/", "")
	f.fs.StringVar(&f.githubTokenFile, "github-token-file", "", "")
	f.fs.Int64Var(&f.appID, "github-app-id", 0, "")
	f.fs.Int64Var(&f.installationID, "github-installation-id", 0, "")
	f.fs.StringVar(&f.appKeyFile, "github-app-private-key-file", "", "")
	f.fs.Int64Var(&f.maxBody, "max-body-bytes", 1<<20, "")
	f.fs.BoolVar(&f.dryRun, "dry-run", false, "")
	f.fs.StringVar(&f.logLevel, "log-level", "info", "")
	if err := f.fs.Parse(args); err != nil {
		return nil, err
	}
	f.fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// alertbridgeObjects reads the Deployment, Service, PVC and ServiceAccount
// of deploy/alertbridge, strictly decoded, and fails on any other kind.
type alertbridgeObjects struct {
	dep *appsv1.Deployment
	svc *corev1.Service
	pvc *corev1.PersistentVolumeClaim
	sa  *corev1.ServiceAccount
}

func readAlertbridge(t *testing.T) alertbridgeObjects {
	t.Helper()
	var o alertbridgeObjects
	for _, file := range []string{"deployment.yaml", "service.yaml", "pvc.yaml", "serviceaccount.yaml"} {
		rel := path.Join(alertbridgeDir, file)
		for _, d := range splitDocs(t, rel, readRepoFile(t, rel)) {
			switch d.Obj.GetKind() {
			case "Deployment":
				o.dep = &appsv1.Deployment{}
				decodeStrict(t, d, o.dep)
			case "Service":
				o.svc = &corev1.Service{}
				decodeStrict(t, d, o.svc)
			case "PersistentVolumeClaim":
				o.pvc = &corev1.PersistentVolumeClaim{}
				decodeStrict(t, d, o.pvc)
			case "ServiceAccount":
				o.sa = &corev1.ServiceAccount{}
				decodeStrict(t, d, o.sa)
			default:
				// A PodDisruptionBudget in particular: with one replica it
				// would block every drain (deployment.yaml says why).
				t.Fatalf("%s: unexpected %s %s", rel, d.Obj.GetKind(), d.Obj.GetName())
			}
		}
	}
	require.NotNil(t, o.dep, "a Deployment")
	require.NotNil(t, o.svc, "a Service")
	require.NotNil(t, o.pvc, "a PersistentVolumeClaim")
	require.NotNil(t, o.sa, "a ServiceAccount")
	return o
}

// mountOf returns the container's mount of the pod volume that satisfies
// match, failing when there is none.
func mountOf(t *testing.T, pod corev1.PodSpec, c corev1.Container, what string, match func(corev1.Volume) bool) corev1.VolumeMount {
	t.Helper()
	for _, v := range pod.Volumes {
		if !match(v) {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				return m
			}
		}
		t.Fatalf("volume %s (%s) is not mounted", v.Name, what)
	}
	t.Fatalf("no volume for %s", what)
	return corev1.VolumeMount{}
}

// TestAlertbridgeArgs checks that every argument is a --flag=value of
// kubemedic-alertbridge whose value parses, that the files the flags name
// are where the ConfigMap, the Secrets and the journal volume are mounted,
// and that the port and probes agree with --listen.
func TestAlertbridgeArgs(t *testing.T) {
	o := readAlertbridge(t)
	pod := o.dep.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Empty(t, c.Command, "the image's entrypoint is the binary")

	flagArg := regexp.MustCompile(`^--([a-z][a-z0-9-]*)=(\S+)$`)
	seen := map[string]bool{}
	for _, a := range c.Args {
		m := flagArg.FindStringSubmatch(a)
		require.NotNil(t, m, "arg %q is not --flag=value", a)
		require.False(t, seen[m[1]], "--%s given twice", m[1])
		seen[m[1]] = true
	}
	f, err := parseAlertbridgeFlags(expandArgs(t, c, nil))
	require.NoError(t, err)
	require.Empty(t, f.fs.Args(), "no positional arguments")
	for _, name := range []string{"config", "listen", "state-dir", "auth-bearer-token-file", "github-url",
		"github-token-file", "max-body-bytes", "dry-run", "log-level"} {
		require.True(t, f.set[name], "--%s is not set; set every flag the deployment relies on explicitly", name)
	}
	require.False(t, f.insecure, "webhooks must be authenticated")
	require.False(t, f.dryRun)
	require.Equal(t, int64(1048576), f.maxBody)
	require.Contains(t, []string{"debug", "info", "warn", "error"}, f.logLevel)
	u, err := url.Parse(f.githubURL)
	require.NoError(t, err)
	require.Equal(t, "https", u.Scheme)
	require.True(t, strings.HasSuffix(u.Path, "/"), "go-github wants a base URL ending in /: %s", f.githubURL)

	// Where each file comes from.
	config := mountOf(t, pod, c, "the config ConfigMap", func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "kubemedic-alertbridge-config"
	})
	require.Equal(t, "/etc/kubemedic/alertbridge", config.MountPath)
	require.True(t, config.ReadOnly)
	require.Equal(t, path.Join(config.MountPath, "config.yaml"), f.config, "config.yaml is the configMapGenerator's key")

	state := mountOf(t, pod, c, "the journal", func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == o.pvc.Name
	})
	require.Equal(t, "/var/lib/kubemedic-alertbridge", state.MountPath)
	require.Equal(t, state.MountPath, f.stateDir)
	require.False(t, state.ReadOnly)

	for _, tc := range []struct{ secret, key, file string }{
		{"kubemedic-alertbridge-webhook", "token", f.bearerFile},
		{"kubemedic-alertbridge-github", "token", f.githubTokenFile},
	} {
		m := mountOf(t, pod, c, "Secret "+tc.secret, func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == tc.secret
		})
		require.True(t, m.ReadOnly, "%s mounted read-only", tc.secret)
		require.Equal(t, path.Join(m.MountPath, tc.key), tc.file, "the flag names key %s of %s", tc.key, tc.secret)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			require.Empty(t, v.Secret.Items, "%s: every key as a file, so the App variant needs no volume change", v.Name)
			require.NotNil(t, v.Secret.DefaultMode)
			require.Zero(t, *v.Secret.DefaultMode&0o007, "%s: not world-readable", v.Name)
		}
	}

	// The one port: --listen, the Service, the probes.
	_, port, err := net.SplitHostPort(f.listen)
	require.NoError(t, err)
	require.Len(t, c.Ports, 1)
	require.Equal(t, "http", c.Ports[0].Name)
	require.Equal(t, port, strconv.Itoa(int(c.Ports[0].ContainerPort)))
	for probe, p := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		require.NotNil(t, probe)
		require.NotNil(t, probe.HTTPGet)
		require.Equal(t, p, probe.HTTPGet.Path)
		require.Equal(t, "http", probe.HTTPGet.Port.String())
	}
	require.Equal(t, "kubemedic-alertbridge", o.svc.Name, "alertmanager-receiver.yaml sends to this name")
	require.Equal(t, o.dep.Spec.Selector.MatchLabels, o.svc.Spec.Selector)
	require.Len(t, o.svc.Spec.Ports, 1)
	require.Equal(t, "http", o.svc.Spec.Ports[0].Name)
	require.Equal(t, int32(8080), o.svc.Spec.Ports[0].Port)
	require.Equal(t, "http", o.svc.Spec.Ports[0].TargetPort.String())
}

// TestAlertbridgePodSpec checks the single-writer journal (one replica,
// Recreate, a ReadWriteOnce claim), the absence of a Kubernetes API token,
// and the security context and resources.
func TestAlertbridgePodSpec(t *testing.T) {
	o := readAlertbridge(t)
	dep, pod := o.dep, o.dep.Spec.Template.Spec
	c := pod.Containers[0]

	require.NotNil(t, dep.Spec.Replicas)
	require.Equal(t, int32(1), *dep.Spec.Replicas, "the journal has one writer")
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, dep.Spec.Strategy.Type,
		"a rolling update would run two bridges on one journal")
	require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, o.pvc.Spec.AccessModes)
	require.True(t, o.pvc.Spec.Resources.Requests.Storage().Equal(resource.MustParse("1Gi")))
	require.Equal(t, "kubemedic-alertbridge-state", o.pvc.Name)

	require.Equal(t, o.sa.Name, pod.ServiceAccountName)
	require.NotNil(t, o.sa.AutomountServiceAccountToken)
	require.False(t, *o.sa.AutomountServiceAccountToken, "no token by default: the Deployment mounts one projected token for the node history, explicitly")
	require.NotNil(t, pod.AutomountServiceAccountToken)
	require.False(t, *pod.AutomountServiceAccountToken)

	require.Equal(t, "ghcr.io/kubemedic/kubemedic-alertbridge:v0.1.0", c.Image, "same registry and tag as the other kubemedic images")
	require.False(t, pod.HostPID || pod.HostNetwork || pod.HostIPC)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	require.GreaterOrEqual(t, *pod.TerminationGracePeriodSeconds, int64(30))
	require.LessOrEqual(t, *pod.TerminationGracePeriodSeconds, int64(120))

	sc := pod.SecurityContext
	require.NotNil(t, sc)
	require.True(t, *sc.RunAsNonRoot)
	require.NotNil(t, sc.RunAsUser, "runAsNonRoot needs a numeric user the kubelet can check")
	require.NotZero(t, *sc.RunAsUser)
	require.NotNil(t, sc.FSGroup, "the journal volume must be writable by the non-root user")
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	csc := c.SecurityContext
	require.NotNil(t, csc)
	require.True(t, *csc.ReadOnlyRootFilesystem)
	require.False(t, *csc.AllowPrivilegeEscalation)
	require.Nil(t, csc.Privileged)
	require.Equal(t, []corev1.Capability{"ALL"}, csc.Capabilities.Drop)
	require.Empty(t, csc.Capabilities.Add)

	require.False(t, c.Resources.Requests.Cpu().IsZero(), "a CPU request")
	require.False(t, c.Resources.Requests.Memory().IsZero(), "a memory request")
	require.False(t, c.Resources.Limits.Memory().IsZero(), "a memory limit")
}

// TestAlertbridgeBinaryAcceptsArgs runs the real kubemedic-alertbridge with
// the Deployment's arguments and --help: it must know every flag.
func TestAlertbridgeBinaryAcceptsArgs(t *testing.T) {
	o := readAlertbridge(t)
	c := o.dep.Spec.Template.Spec.Containers[0]
	bin := harness.GoBuild(t, "./cmd/kubemedic-alertbridge")
	args := append(expandArgs(t, c, nil), "--help")
	out, _ := exec.Command(bin, args...).CombinedOutput()
	require.NotRegexp(t, `unknown flag|flag provided but not defined|invalid (argument|value)`, string(out))
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.Contains(t, string(out), "-"+name, "--help does not list --%s", name)
	}
}

// alertmanagerConfig is the part of alertmanager.yml the test looks at.
type alertmanagerConfig struct {
	Route struct {
		Routes []struct {
			Receiver string   `json:"receiver"`
			Matchers []string `json:"matchers"`
			GroupBy  []string `json:"group_by"`
		} `json:"routes"`
	} `json:"route"`
	Receivers []struct {
		Name           string `json:"name"`
		WebhookConfigs []struct {
			URL          string `json:"url"`
			SendResolved *bool  `json:"send_resolved"`
			MaxAlerts    *int   `json:"max_alerts"`
			HTTPConfig   struct {
				Authorization struct {
					Type            string `json:"type"`
					CredentialsFile string `json:"credentials_file"`
				} `json:"authorization"`
			} `json:"http_config"`
		} `json:"webhook_configs"`
	} `json:"receivers"`
}

// TestAlertmanagerReceiver checks the example Alertmanager config with
// Alertmanager's own amtool, that it routes kubemedic's alerts to the bridge
// (and the bridge's own alerts elsewhere), and that the webhook reaches the
// bridge's Service with a bearer token.
func TestAlertmanagerReceiver(t *testing.T) {
	amtool := harness.Tool(t, "amtool")
	file := filepath.Join(repoRoot(t), alertbridgeDir, "alertmanager-receiver.yaml")
	out, err := exec.Command(amtool, "check-config", file).CombinedOutput()
	require.NoError(t, err, "amtool check-config:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")

	for _, tc := range []struct {
		labels   []string
		receiver string
	}{
		{[]string{"alertname=KubemedicGPULost", "node=gpu-7", "condition=GPULost", "severity=critical"}, "kubemedic-alertbridge"},
		{[]string{"alertname=KubemedicNodeRepairing", "node=gpu-7", "severity=info"}, "kubemedic-alertbridge"},
		{[]string{"alertname=KubemedicNodeQuarantined", "node=gpu-7", "severity=warning"}, "kubemedic-alertbridge"},
		{[]string{"alertname=KubemedicRemediationBreakerOpen", "policy=gpu-xid-reset"}, "kubemedic-alertbridge"},
		// The fleet's view of failures names no node: not a second issue
		// beside the node's.
		{[]string{"alertname=KubemedicRemediationFailed", "policy=gpu-xid-reset", "step=reset-gpu"}, "default"},
		{[]string{"alertname=KubemedicAlertbridgeDown", "severity=critical"}, "default"},
		{[]string{"alertname=KubemedicAlertbridgeQueueStuck"}, "default"},
		{[]string{"alertname=NodeNotReady", "node=gpu-7"}, "default"},
	} {
		args := append([]string{"config", "routes", "test", "--config.file=" + file}, tc.labels...)
		cmd := exec.Command(amtool, args...)
		out, err := cmd.Output()
		require.NoError(t, err, "amtool %s", strings.Join(args, " "))
		require.Equal(t, tc.receiver, strings.TrimSpace(string(out)), "receiver of %v", tc.labels)
	}

	var cfg alertmanagerConfig
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, path.Join(alertbridgeDir, "alertmanager-receiver.yaml")), &cfg))
	o := readAlertbridge(t)
	found := false
	for _, r := range cfg.Receivers {
		if r.Name != "kubemedic-alertbridge" {
			continue
		}
		found = true
		require.Len(t, r.WebhookConfigs, 1)
		w := r.WebhookConfigs[0]
		want := "http://" + o.svc.Name + "." + namespace + ".svc:" + strconv.Itoa(int(o.svc.Spec.Ports[0].Port)) + "/webhook"
		require.Equal(t, want, w.URL)
		require.NotNil(t, w.SendResolved)
		require.True(t, *w.SendResolved, "the bridge closes issues on resolve")
		require.NotNil(t, w.MaxAlerts)
		require.Equal(t, "Bearer", w.HTTPConfig.Authorization.Type)
		require.NotEmpty(t, w.HTTPConfig.Authorization.CredentialsFile, "the token from a file, not inline")
	}
	require.True(t, found, "a receiver named kubemedic-alertbridge")

	// One issue per node incident: the bridge's route for alerts with a
	// node groups by the node alone; the one for the rest by alertname.
	var groupBy [][]string
	for _, r := range cfg.Route.Routes {
		if r.Receiver == "kubemedic-alertbridge" {
			groupBy = append(groupBy, r.GroupBy)
			if slices.Equal(r.GroupBy, []string{"node"}) {
				require.Contains(t, r.Matchers, `node=~".+"`, "only alerts that have a node group by it")
			}
		}
	}
	require.Equal(t, [][]string{{"node"}, {"alertname"}}, groupBy)
}
