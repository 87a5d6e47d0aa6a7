package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubemedic/kubemedic/policies"
)

func newValidateCommand(stdout, stderr io.Writer) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR [-f FILE|DIR ...]",
		Short: "Check policy files without a cluster",
		Long: `Validate decodes every YAML document in the given files and directories
(*.yaml and *.yml, recursively) strictly, applies the defaults the API server
would apply, and checks each object against the same rules as the CRDs plus
what they cannot check: regular expressions compile, time zones exist,
operation templates named by policies are among the loaded files, and a
namespaced ReclaimPolicy is no looser than the ClusterReclaimPolicies loaded
with it.

Each problem is printed on one line as FILE:LINE: FIELD: WHAT IS WRONG.
A missing file, a file without documents and a document that is not a
kubemedic.io/v1alpha1 kind are problems too.

Exit status: 0 when every document is valid, 1 when there are problems,
2 for bad usage.`,
		Example: `  kubemedic policy validate -f policies/examples/
  kubemedic policy validate -f operation-templates.yaml -f gpu-xid.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(append([]string{}, files...), args...)
			if len(paths) == 0 {
				return fmt.Errorf("no files given: use -f FILE or -f DIR")
			}
			return exitCode(runValidate(paths, stdout, stderr))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "policy file or directory to check (repeatable)")
	return cmd
}

func exitCode(code int) error {
	if code == ExitOK {
		return nil
	}
	return ExitError{Code: code}
}

// runValidate prints one line per problem on stdout and a summary on stderr.
func runValidate(paths []string, stdout, stderr io.Writer) int {
	docs, problems := policies.LoadFiles(paths...)
	problems = append(problems, policies.ValidateSet(docs)...)
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	for _, p := range problems {
		fmt.Fprintln(stdout, p.String())
	}
	files := map[string]bool{}
	kinds := map[string]int{}
	for _, d := range docs {
		files[d.File] = true
		kinds[d.Kind]++
	}
	var parts []string
	for _, k := range policies.Kinds() {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	summary := fmt.Sprintf("%d documents in %d files", len(docs), len(files))
	if len(parts) > 0 {
		summary += " (" + strings.Join(parts, ", ") + ")"
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "%d problems; %s decoded\n", len(problems), summary)
		return ExitInvalid
	}
	fmt.Fprintf(stderr, "valid: %s\n", summary)
	return ExitOK
}
