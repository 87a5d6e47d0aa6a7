package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/diagnostics/store"
)

// DefaultBugReportTimeout bounds nvidia-bug-report.sh.
const DefaultBugReportTimeout = 3 * time.Minute

// Main runs kubemedic-diag: "capture" (on the node, in the capture pod)
// or "flush" (upload what the spool holds). It returns the exit status:
// 0 a bundle was made (or the spool flushed), 1 no bundle (or a bundle
// stays), 2 bad usage.
func Main(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || (args[0] != "capture" && args[0] != "flush") {
		fmt.Fprintln(stderr, "usage: kubemedic-diag capture|flush [flags]; kubemedic-diag capture --help")
		return 2
	}
	fs := pflag.NewFlagSet("kubemedic-diag "+args[0], pflag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "the host's root file system, as mounted in the pod")
	spool := fs.String("spool", "", "the spool on the node's disk (default "+diagnostics.SpoolDir+" under --root)")
	var cfg store.Config
	fs.StringVar(&cfg.Endpoint, "endpoint", getenv(diagnostics.EnvEndpoint), "S3-compatible store, host:port ($"+diagnostics.EnvEndpoint+"); empty: the bundle stays in the spool")
	fs.StringVar(&cfg.Bucket, "bucket", getenv(diagnostics.EnvBucket), "bucket ($"+diagnostics.EnvBucket+")")
	fs.StringVar(&cfg.Region, "region", getenv(diagnostics.EnvRegion), "region ($"+diagnostics.EnvRegion+")")
	fs.BoolVar(&cfg.Insecure, "insecure", getenv(diagnostics.EnvInsecure) == "true", "plain HTTP to the store ($"+diagnostics.EnvInsecure+"=true)")
	credDir := fs.String("credentials-dir", "", "directory of a mounted Secret with accessKey and secretKey; default: $"+diagnostics.EnvAccessKey+" and $"+diagnostics.EnvSecretKey)
	timeout := fs.Duration("store-timeout", 2*time.Minute, "bound on the uploads")
	node := fs.String("node", getenv(diagnostics.EnvNode), "node name ($"+diagnostics.EnvNode+")")
	operation := fs.String("operation", getenv(diagnostics.EnvOperation), "NodeOperation name ($"+diagnostics.EnvOperation+")")
	bugReport := fs.Duration("bug-report-timeout", DefaultBugReportTimeout, "hard bound on nvidia-bug-report.sh")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the report for the remediator is written")
	kmsg := fs.String("kmsg", DefaultKmsg, "the kernel log under --root: /dev/kmsg, or a file of kmsg records or dmesg lines")
	noChroot := fs.Bool("no-chroot", false, "run the host's tools found under --root without chrooting into it (a --root of fakes: tests and the demo)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *spool == "" {
		*spool = host.Root(*root).Path(diagnostics.SpoolDir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var st *store.Store
	var storeErr error
	if cfg.Endpoint != "" {
		cred, err := readCredentials(*credDir, getenv)
		if err == nil {
			st, err = store.New(cfg, cred)
		}
		storeErr = err
	}
	flush := func() ([]string, []error) {
		if st == nil {
			return nil, nil
		}
		fctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return Flush(fctx, *spool, st)
	}

	if args[0] == "flush" {
		if st == nil {
			fmt.Fprintf(stderr, "kubemedic-diag flush: no store: %v\n", orNoEndpoint(storeErr))
			return 2
		}
		stored, errs := flush()
		for _, k := range stored {
			fmt.Fprintf(stdout, "stored %s\n", k)
		}
		for _, e := range errs {
			fmt.Fprintf(stderr, "kept: %v\n", e)
		}
		// The remediator puts this in the Event on the Node.
		msg := fmt.Sprintf("%d bundles stored", len(stored))
		if len(stored) > 0 {
			msg += " (" + strings.Join(stored, ", ") + ")"
		}
		if len(errs) > 0 {
			msg += fmt.Sprintf("; %d kept in the spool: %v", len(errs), errors.Join(errs...))
		}
		if err := os.WriteFile(*termLog, []byte(diagnostics.Truncate(msg, diagnostics.MaxReport)), 0o644); err != nil && *termLog != "/dev/termination-log" {
			fmt.Fprintf(stderr, "kubemedic-diag: write %s: %v\n", *termLog, err)
		}
		if len(errs) > 0 {
			return 1
		}
		return 0
	}

	if *node == "" || *operation == "" {
		fmt.Fprintf(stderr, "kubemedic-diag capture: --node and --operation (or $%s and $%s) are required\n", diagnostics.EnvNode, diagnostics.EnvOperation)
		return 2
	}
	c := &Capture{Root: host.Root(*root), Node: *node, Operation: *operation, Parts: DefaultParts(*bugReport, *kmsg), Spool: *spool, Now: time.Now, NoChroot: *noChroot, GPU: getenv(diagnostics.EnvGPU)}
	if t := getenv(diagnostics.EnvTriggerType); t != "" {
		c.Trigger = &diagnostics.Trigger{Type: t, Reason: getenv(diagnostics.EnvTriggerReason), Message: getenv(diagnostics.EnvTriggerMsg)}
	}
	m, sp, err := c.Run(ctx)
	if err != nil {
		r := diagnostics.Report{Result: v1alpha1.DiagnosticsFailed, Message: diagnostics.Truncate("no bundle: "+err.Error(), 1024)}
		writeReport(*termLog, r, stdout, stderr)
		return 1
	}
	stored, errs := flush()
	isStored := false
	for _, k := range stored {
		if k == sp.Key {
			isStored = true
		}
	}
	if storeErr == nil && len(errs) > 0 {
		storeErr = errors.Join(errs...)
	}
	flushed := len(stored)
	if isStored {
		flushed--
	}
	writeReport(*termLog, NewReport(m, sp, isStored, storeErr, flushed), stdout, stderr)
	return 0
}

func orNoEndpoint(err error) error {
	if err == nil {
		return errors.New("--endpoint (or $" + diagnostics.EnvEndpoint + ") is not set")
	}
	return err
}

func readCredentials(dir string, getenv func(string) string) (store.Credentials, error) {
	if dir != "" {
		return store.CredentialsFromFiles(dir)
	}
	c := store.Credentials{AccessKey: getenv(diagnostics.EnvAccessKey), SecretKey: getenv(diagnostics.EnvSecretKey)}
	if c.AccessKey == "" || c.SecretKey == "" {
		return store.Credentials{}, fmt.Errorf("diagnostics store credentials: set --credentials-dir, or $%s and $%s", diagnostics.EnvAccessKey, diagnostics.EnvSecretKey)
	}
	return c, nil
}

// writeReport writes the report to the termination log and a summary to
// stdout; a termination log that cannot be written is said on stderr (the
// remediator then sees no report and records the capture as failed).
func writeReport(path string, r diagnostics.Report, stdout, stderr io.Writer) {
	b := r.Encode()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintf(stderr, "kubemedic-diag: write the report to %s: %v\n", path, err)
	}
	fmt.Fprintf(stdout, "%s: %s %s (%d bytes, sha256 %s)\n", r.Result, r.Key, strings.TrimSpace(r.Message), r.Size, r.SHA256)
}
