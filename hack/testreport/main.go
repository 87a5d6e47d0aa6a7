// Command testreport reads `go test -json` on stdin and prints what a person
// needs: the build errors, the package result lines, the whole output of
// every failing test, and every skipped test with its reason. It exits 1
// when a build or a test failed, or when a test skipped that the allow-list
// (-skips FILE) does not name: in `make test` only a missing capability of
// the machine (root, /dev/fuse, ...) may skip a test, never a missing test
// binary or a forgotten t.Skip.
//
// The allow-list has one rule per line, `#` starts a comment:
//
//	<package relative to the module> <test name regexp> <why>
//
// The regexp is matched against the whole test name, subtests included
// (TestX/case_name); the why is required.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

func main() {
	skipsFile := flag.String("skips", "", "allow-list of the tests that may skip (see the package doc)")
	module := flag.String("module", "github.com/kubemedic/kubemedic", "module path the allow-list's packages are relative to")
	flag.Parse()
	var rules []rule
	if *skipsFile != "" {
		f, err := os.Open(*skipsFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
		rules, err = parseRules(f, *skipsFile, *module)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
	}
	if !report(os.Stdin, os.Stdout, rules) {
		os.Exit(1)
	}
}

// rule allows the tests of one package whose names match test to skip.
type rule struct {
	pkg  string
	test *regexp.Regexp
	why  string
}

func parseRules(r io.Reader, name, module string) ([]rule, error) {
	var rules []rule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want <package> <test regexp> <why>, got %q", name, n, strings.TrimSpace(line))
		}
		re, err := regexp.Compile("^(?:" + fields[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s:%d: test regexp: %w", name, n, err)
		}
		pkg := module
		if fields[0] != "." {
			pkg = module + "/" + strings.TrimPrefix(fields[0], "./")
		}
		rules = append(rules, rule{pkg: pkg, test: re, why: strings.Join(fields[2:], " ")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return rules, nil
}

// event is one line of `go test -json`: a TestEvent, or a BuildEvent
// (ImportPath set) for the build output of a package.
type event struct {
	ImportPath  string
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

type skip struct {
	pkg, test, reason string
	allowedBy         *rule
}

// report copies the stream in to out as described in the package doc and
// returns whether everything passed with only allowed skips.
func report(in io.Reader, out io.Writer, rules []rule) bool {
	var (
		buffers     = map[[2]string]*strings.Builder{} // output of running tests, by package and test
		skips       []skip
		failedTests []string
		failedPkgs  = map[string]bool{}
		pkgs        = map[string]bool{}
	)
	flushUnfinished := func(pkg string) {
		var names []string
		for k := range buffers {
			if k[0] == pkg {
				names = append(names, k[1])
			}
		}
		sort.Strings(names)
		for _, name := range names {
			k := [2]string{pkg, name}
			fmt.Fprintf(out, "--- output of %s %s, which did not finish:\n%s", pkg, name, buffers[k].String())
			delete(buffers, k)
		}
	}

	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			var e event
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
				// Not an event: go test's own errors (bad flags, no
				// packages) come this way.
				fmt.Fprint(out, line)
			} else {
				handle(e, out, buffers, &skips, &failedTests, failedPkgs, pkgs, flushUnfinished)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(out, "testreport: read: %v\n", err)
			return false
		}
	}
	for pkg := range pkgs {
		flushUnfinished(pkg)
	}

	disallowed := 0
	if len(skips) > 0 {
		fmt.Fprintf(out, "\nSkipped tests (%d):\n", len(skips))
		for i := range skips {
			s := &skips[i]
			for j := range rules {
				if rules[j].pkg == s.pkg && rules[j].test.MatchString(s.test) {
					s.allowedBy = &rules[j]
					break
				}
			}
			verdict := "NOT ALLOWED: only a missing capability may skip a test; fix the test or the machine, or add it to the allow-list with why"
			if s.allowedBy != nil {
				verdict = "allowed: " + s.allowedBy.why
			} else {
				disallowed++
			}
			fmt.Fprintf(out, "  SKIP %s %s: %s\n       %s\n", s.pkg, s.test, s.reason, verdict)
		}
	}
	fmt.Fprintf(out, "\n%d packages, %d failed; %d tests failed; %d skipped, %d of them not allowed\n",
		len(pkgs), len(failedPkgs), len(failedTests), len(skips), disallowed)
	if len(failedTests) > 0 {
		fmt.Fprintf(out, "Failed: %s\n", strings.Join(failedTests, ", "))
	}
	return len(failedPkgs) == 0 && len(failedTests) == 0 && disallowed == 0
}

func handle(e event, out io.Writer, buffers map[[2]string]*strings.Builder, skips *[]skip,
	failedTests *[]string, failedPkgs, pkgs map[string]bool, flushUnfinished func(string)) {
	if e.ImportPath != "" {
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			// The test event that follows fails the package, and says
			// "[build failed]".
		}
		return
	}
	if e.Package == "" {
		return
	}
	pkgs[e.Package] = true
	if e.Test == "" {
		switch e.Action {
		case "output":
			if strings.HasPrefix(e.Output, "FAIL") {
				// A timeout or a panic ends the package with tests still
				// running: their output goes before the package's FAIL.
				flushUnfinished(e.Package)
			}
			if e.Output != "PASS\n" && e.Output != "FAIL\n" {
				fmt.Fprint(out, e.Output)
			}
		case "fail":
			failedPkgs[e.Package] = true
			flushUnfinished(e.Package)
		}
		return
	}
	key := [2]string{e.Package, e.Test}
	switch e.Action {
	case "run":
		buffers[key] = &strings.Builder{}
	case "output":
		b := buffers[key]
		if b == nil {
			b = &strings.Builder{}
			buffers[key] = b
		}
		b.WriteString(e.Output)
	case "pass":
		delete(buffers, key)
	case "skip":
		*skips = append(*skips, skip{pkg: e.Package, test: e.Test, reason: skipReason(buffers[key])})
		delete(buffers, key)
	case "fail":
		if b := buffers[key]; b != nil {
			fmt.Fprint(out, b.String())
		}
		delete(buffers, key)
		*failedTests = append(*failedTests, e.Package+"."+e.Test)
	}
}

// skipReason returns what a skipped test logged, without the === and ---
// lines go test adds around it.
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "(no reason given)"
	}
	var lines []string
	for line := range strings.Lines(b.String()) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- SKIP") {
			continue
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "(no reason given)"
	}
	return strings.Join(lines, " | ")
}
