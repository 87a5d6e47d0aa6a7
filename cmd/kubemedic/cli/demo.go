package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
)

type demoOptions struct {
	nodes      int
	migEvery   int
	policyDirs []string
	kubeconfig string
}

func newDemoCommand(stdout, stderr io.Writer) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local control plane with simulated GPU nodes and the example policies",
		Long: `Demo starts a real kube-apiserver and etcd on this machine (no cluster
needed), installs the kubemedic CRDs, starts kwok to simulate GPU nodes
(labels, capacity, MIG devices, heartbeats), and applies the example
policies. It prints how to point kubectl at it and runs until Ctrl-C, then
tears everything down.

The kubeconfig goes to $TMPDIR/kubemedic-demo.kubeconfig; while another
demo runs with that path, to kubemedic-demo-<pid>.kubeconfig beside it, and
the demo says so. A second demo given the --kubeconfig of a running one
refuses, naming that demo's pid. Each demo has its own control plane, and
stopping one never touches another.

The test binaries come from 'make testbin' (KUBEMEDIC_TESTBIN or
hack/testbin.sh --print).`,
		Example: `  make demo
  kubemedic demo --nodes 64 --kubeconfig /tmp/my-demo.kubeconfig`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.nodes < 1 {
				return fmt.Errorf("--nodes must be at least 1, got %d", o.nodes)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := runDemo(ctx, o, stdout); err != nil {
				fmt.Fprintf(stderr, "demo: %v\n", err)
				return exitError{code: ExitInvalid}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.nodes, "nodes", 16, "number of simulated GPU nodes")
	cmd.Flags().IntVar(&o.migEvery, "mig-every", 4, "every k-th node exposes MIG devices instead of whole GPUs (0: none)")
	cmd.Flags().StringArrayVar(&o.policyDirs, "policies", []string{"policies/examples"}, "policy files or directories to apply")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the kubeconfig of the demo cluster (default $TMPDIR/kubemedic-demo.kubeconfig, or kubemedic-demo-<pid>.kubeconfig beside it while another demo holds that)")
	return cmd
}

func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	docs, problems := policies.LoadFiles(o.policyDirs...)
	problems = append(problems, policies.ValidateSet(docs)...)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(out, p.String())
		}
		return fmt.Errorf("%d problems in the policies to apply (run from the repository root, or pass --policies FILE|DIR)", len(problems))
	}

	explicit := o.kubeconfig != ""
	if !explicit {
		o.kubeconfig = defaultDemoKubeconfig()
	}
	kc, err := claimDemoKubeconfig(o.kubeconfig, explicit)
	if err != nil {
		return err
	}
	defer kc.Release()
	if kc.Other != 0 {
		say("Another demo (pid %d) is running with %s; this one writes its own kubeconfig, %s", kc.Other, o.kubeconfig, kc.Path)
	}
	o.kubeconfig = kc.Path

	say("Starting kube-apiserver, etcd and kwok, installing the kubemedic CRDs")
	env, err := localcluster.New(ctx, localcluster.Options{Kwok: true, Logf: func(f string, a ...any) { say(f, a...) }})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the control plane and kwok")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(out, "demo: stop: %v\n", err)
		}
	}()

	nodes, err := env.CreateGPUNodes(ctx, o.nodes, localcluster.NodeSpec{MIGEvery: o.migEvery})
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	if err := env.WaitNodesReady(ctx, names...); err != nil {
		return fmt.Errorf("wait for nodes: %w", err)
	}
	say("%d simulated GPU nodes are Ready (%s … %s)", len(nodes), names[0], names[len(names)-1])

	for _, d := range docs {
		obj := d.Object.(client.Object)
		if ns := obj.GetNamespace(); ns != "" {
			if err := ensureNamespace(ctx, env.Client, ns); err != nil {
				return err
			}
		}
		if err := env.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("apply %s %s from %s:%d: %w", d.Kind, client.ObjectKeyFromObject(obj), d.File, d.Line, err)
		}
	}
	say("Applied %d objects from %v", len(docs), o.policyDirs)

	data, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	if err := os.WriteFile(o.kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	say("Ready in %s. In another shell:", time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(out, `
    export KUBECONFIG=%s
    kubectl get nodes -L nvidia.com/gpu.product,topology.kubernetes.io/zone
    kubectl get remediationpolicies,nodeoperationtemplates,clusterreclaimpolicies
    kubectl get reclaimpolicies -A

A kubectl of the API server's version is at %s.
Press Ctrl-C to stop and tear everything down.
`, o.kubeconfig, filepath.Join(env.BinDir, "kubectl"))
	<-ctx.Done()
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
