package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

func newDiagCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diag",
		Short: "List and download the diagnostics bundles kubemedic kept before repairing nodes",
		Long: `Before a step that names diagnostics changes a node, kubemedic captures the
node's GPU evidence (nvidia-bug-report, nvidia-smi -q, the kernel log's Xid
lines, the journals, lspci, dcgmi diag) into a bundle in the diagnostics
store, and records it in the NodeOperation's status.diagnostics
(docs/diagnostics.md). list and get read those records (they only get and
list, and download through the presigned link the status holds); flush asks
the remediator to upload what waits in a node's spool.`,
	}
	cmd.AddCommand(newDiagListCommand(stdout, stderr), newDiagGetCommand(stdout, stderr), newDiagFlushCommand(stdout, stderr))
	return cmd
}

func newDiagListCommand(stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "list NODE [--kubeconfig FILE]",
		Short: "List a node's captures: operation, result, when, size, sha256, stored or still in the node's spool",
		Example: `  kubemedic diag list gpu-node-001
  kubectl medic diag list gpu-node-001`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, host, err := newReadOnlyClient(kubeconfig, "kubemedic-diag-list")
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic diag list: %v\n", err)
				return exitCode(ExitInvalid)
			}
			ops, err := readCaptures(cmd.Context(), c, args[0])
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic diag list: %s: %v\n", host, err)
				return exitCode(ExitInvalid)
			}
			printCaptures(stdout, args[0], ops)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	return cmd
}

func newDiagGetCommand(stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig, out string
	cmd := &cobra.Command{
		Use:   "get NODEOPERATION [-o FILE] [--kubeconfig FILE]",
		Short: "Download a NodeOperation's bundle through its presigned link and check its sha256",
		Long: `Get downloads the bundle of the NodeOperation's capture through the presigned
link in its status, checks the sha256 the status records, and writes it to
-o (default <NODEOPERATION>.tar.gz in the current directory) only when it
matches. A bundle still in the node's spool, or a link past its expiry, is
an error that says so.

Exit status: 0 written; 1 no bundle, a failed download or a sha256 that
does not match (nothing is written); 2 bad usage.`,
		Example: `  kubemedic diag get gpu-xid-reset.gpu-node-001.8c2f10aa-0
  tar -xzf gpu-xid-reset.gpu-node-001.8c2f10aa-0.tar.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := newReadOnlyClient(kubeconfig, "kubemedic-diag-get")
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic diag get: %v\n", err)
				return exitCode(ExitInvalid)
			}
			var op v1alpha1.NodeOperation
			if err := c.Get(cmd.Context(), client.ObjectKey{Name: args[0]}, &op); err != nil {
				fmt.Fprintf(stderr, "kubemedic diag get: nodeoperation %s: %v\n", args[0], err)
				return exitCode(ExitInvalid)
			}
			if out == "" {
				out = op.Name + ".tar.gz"
			}
			n, err := getBundle(cmd.Context(), &http.Client{Timeout: downloadTimeout}, &op, time.Now(), out)
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic diag get: %v\n", err)
				return exitCode(ExitInvalid)
			}
			fmt.Fprintf(stdout, "%s: %d bytes, sha256 %s (checked)\n", out, n, op.Status.Diagnostics.Bundle.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default <NODEOPERATION>.tar.gz)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	return cmd
}

// downloadTimeout bounds a bundle's download: tens of MiB from an
// in-cluster store take seconds; a store that stops answering must not
// hold the command forever.
const downloadTimeout = 15 * time.Minute

// readCaptures lists the node's NodeOperations that captured, oldest
// capture first.
func readCaptures(ctx context.Context, c client.Reader, node string) ([]v1alpha1.NodeOperation, error) {
	var list v1alpha1.NodeOperationList
	if err := c.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelNode: plan.LabelValue(node)}); err != nil {
		return nil, fmt.Errorf("list nodeoperations: %w", err)
	}
	var out []v1alpha1.NodeOperation
	for _, op := range list.Items {
		if op.Spec.NodeName == node && op.Status.Diagnostics != nil {
			out = append(out, op)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return captureTime(&out[i]).Before(captureTime(&out[j])) })
	return out, nil
}

func captureTime(op *v1alpha1.NodeOperation) time.Time {
	d := op.Status.Diagnostics
	switch {
	case d.CompletionTime != nil:
		return d.CompletionTime.Time
	case d.StartTime != nil:
		return d.StartTime.Time
	}
	return op.CreationTimestamp.Time
}

// printCaptures writes the table of a node's captures.
func printCaptures(w io.Writer, node string, ops []v1alpha1.NodeOperation) {
	if len(ops) == 0 {
		fmt.Fprintf(w, "No captures on node %s (NodeOperations with status.diagnostics).\n", node)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODEOPERATION\tSTEP\tRESULT\tCAPTURED\tSIZE\tWHERE\tSHA256")
	for i := range ops {
		op := &ops[i]
		d := op.Status.Diagnostics
		size, where, sum := "-", "-", "-"
		if b := d.Bundle; b != nil {
			size, sum = fmt.Sprint(b.Size), b.SHA256
			where = "store: " + b.Key
			if !b.Stored {
				where = "node's spool"
			}
		}
		when := "-"
		if d.CompletionTime != nil {
			when = d.CompletionTime.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", op.Name, orDash(op.Spec.Step), d.Result, when, size, where, sum)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// getBundle downloads the operation's bundle into path through its link,
// through a temporary file beside it that becomes path only when the
// sha256 matches the status's.
func getBundle(ctx context.Context, hc *http.Client, op *v1alpha1.NodeOperation, now time.Time, path string) (int64, error) {
	d := op.Status.Diagnostics
	switch {
	case d == nil:
		return 0, fmt.Errorf("nodeoperation %s captured nothing (no status.diagnostics)", op.Name)
	case d.Bundle == nil:
		return 0, fmt.Errorf("nodeoperation %s: the capture made no bundle (%s): %s", op.Name, d.Result, d.Message)
	case !d.Bundle.Stored:
		return 0, fmt.Errorf("nodeoperation %s: the bundle %s waits in node %s's spool (%s) for the store; it is uploaded by the next capture there, or after kubemedic diag flush %s", op.Name, d.Bundle.Key, op.Spec.NodeName, "/var/lib/kubemedic/diagnostics", op.Spec.NodeName)
	case d.Bundle.URL == "":
		return 0, fmt.Errorf("nodeoperation %s: the bundle %s is stored but has no link: %s", op.Name, d.Bundle.Key, d.Message)
	case d.Bundle.URLExpires != nil && !now.Before(d.Bundle.URLExpires.Time):
		return 0, fmt.Errorf("nodeoperation %s: the link to %s expired at %s; fetch the object with the store's credentials", op.Name, d.Bundle.Key, d.Bundle.URLExpires.UTC().Format(time.RFC3339))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.Bundle.URL, nil)
	if err != nil {
		return 0, fmt.Errorf("nodeoperation %s: link: %w", op.Name, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", d.Bundle.Key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("download %s: the store answered %s", d.Bundle.Key, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubemedic-diag-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("download %s: %w", d.Bundle.Key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Bundle.SHA256 {
		return n, fmt.Errorf("download %s: sha256 %s, the status records %s; nothing written", d.Bundle.Key, got, d.Bundle.SHA256)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, errors.Join(fmt.Errorf("write %s", path), err)
	}
	return n, nil
}

func newDiagFlushCommand(stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "flush NODE [--kubeconfig FILE]",
		Short: "Ask the remediator to upload the bundles waiting in a node's spool",
		Long: `Flush annotates the Node with ` + v1alpha1.AnnotationDiagnosticsFlush + `=<now>. The
remediator then runs one flush pod on the node (the collect-gpu-diagnostics
template, with "kubemedic-diag flush"), which uploads every bundle in
/var/lib/kubemedic/diagnostics whose sha256 the store confirms, and says
how it went in an Event on the Node (DiagnosticsFlushed or
DiagnosticsFlushFailed), then removes the annotation. The operations whose
bundles were waiting are recorded as stored within a minute. It changes
nothing else: it needs patch on nodes.`,
		Example: `  kubemedic diag flush gpu-node-001
  kubectl get events --field-selector involvedObject.name=gpu-node-001,reason=DiagnosticsFlushed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := NewClient(kubeconfig, "kubemedic-diag-flush", false)
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic diag flush: %v\n", err)
				return exitCode(ExitInvalid)
			}
			if err := askFlush(cmd.Context(), c, args[0], time.Now()); err != nil {
				fmt.Fprintf(stderr, "kubemedic diag flush: %v\n", err)
				return exitCode(ExitInvalid)
			}
			fmt.Fprintf(stdout, "Asked the remediator to flush node %s's diagnostics spool. Watch: kubectl get events --field-selector involvedObject.name=%s,reason=%s\n",
				args[0], args[0], v1alpha1.EventDiagnosticsFlushed)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	return cmd
}

// askFlush annotates the node so that the remediator flushes its spool.
func askFlush(ctx context.Context, c client.Client, node string, now time.Time) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationDiagnosticsFlush, now.UTC().Format(time.RFC3339))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	return nil
}
