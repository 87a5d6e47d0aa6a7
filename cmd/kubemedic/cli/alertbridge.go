package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

func newAlertbridgeCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alertbridge",
		Short: "Work with the alertbridge's config: check it, preview issues",
	}
	cmd.AddCommand(newAlertbridgeRenderCommand(stdout, stderr))
	return cmd
}

func newAlertbridgeRenderCommand(stdout, stderr io.Writer) *cobra.Command {
	var configFile, payloadFile string
	cmd := &cobra.Command{
		Use:   "render --config FILE --payload FILE",
		Short: "Show the GitHub issue the alertbridge would file for a webhook payload",
		Long: `Render loads an alertbridge config the way the bridge does (strictly: every
problem is printed as FILE:LINE: FIELD: WHAT IS WRONG), decodes an
Alertmanager version-4 webhook payload (one alert group, as Alertmanager
POSTs it), and prints the issue the bridge would file for it: the
repository, the dedupe key and its hash, the title, labels, assignees,
whether it would be closed when the group resolves, then the body.

It reads only the two files: nothing is sent to GitHub, and it says
nothing about whether an issue for the key already exists.

Exit status: 0 when the issue rendered, 1 for an invalid config or payload
or a template that fails on this payload, 2 for bad usage.`,
		Example: `  # Preview the issue for a captured webhook, with the deployed config
  kubemedic alertbridge render --config deploy/alertbridge/config.yaml --payload webhook.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configFile == "" || payloadFile == "" {
				return fmt.Errorf("both --config FILE and --payload FILE are required")
			}
			return exitCode(runAlertbridgeRender(configFile, payloadFile, stdout, stderr))
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "alertbridge config file (YAML)")
	cmd.Flags().StringVar(&payloadFile, "payload", "", "Alertmanager webhook payload (JSON)")
	return cmd
}

// runAlertbridgeRender prints the issue on stdout; problems go to stderr.
func runAlertbridgeRender(configFile, payloadFile string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(configFile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitInvalid
	}
	data, err := os.ReadFile(payloadFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(stderr, "%s: read payload: %v\n", payloadFile, err)
		return ExitInvalid
	}
	msg, err := payload.DecodeBytes(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", payloadFile, err)
		return ExitInvalid
	}
	iss, err := render.Render(cfg, msg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", payloadFile, err)
		return ExitInvalid
	}
	printIssue(stdout, cfg, iss)
	return ExitOK
}

func printIssue(w io.Writer, cfg *config.Config, iss *render.Issue) {
	none := func(ss []string) string {
		if len(ss) == 0 {
			return "(none)"
		}
		return strings.Join(ss, ", ")
	}
	autoClose := "yes"
	switch {
	case !cfg.AutoClose:
		autoClose = "no (autoClose: false)"
	case iss.SkipAutoClose:
		autoClose = "no (an alert has the annotation " + render.SkipAutoCloseAnnotation + ")"
	}
	fmt.Fprintf(w, "Repo:       %s\n", iss.Repo)
	fmt.Fprintf(w, "Key:        %s\n", iss.Key)
	fmt.Fprintf(w, "Key hash:   %s\n", iss.KeyHash)
	fmt.Fprintf(w, "Title:      %s\n", iss.Title)
	fmt.Fprintf(w, "Labels:     %s\n", none(iss.Labels))
	fmt.Fprintf(w, "Assignees:  %s\n", none(iss.Assignees))
	fmt.Fprintf(w, "Auto-close: %s\n", autoClose)
	if cfg.DryRun {
		fmt.Fprintln(w, "Dry run:    yes (the config's dryRun: the bridge would change nothing on GitHub)")
	}
	fmt.Fprintf(w, "Body (%d bytes):\n\n%s", len(iss.Body), iss.Body)
}
