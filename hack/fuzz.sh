#!/usr/bin/env bash
# fuzz.sh runs every fuzz target in the repository for FUZZTIME each (`make
# fuzz`, 2m; .ci/run, 3s, so that a target that finds a bug in seconds fails
# CI). The targets are what `go test -list '^Fuzz'` names in the packages
# whose test files declare a func Fuzz, so a new target runs without being
# listed anywhere.
#
# A failing target does not stop the others. At the end each failure is
# named with the input the fuzzer saved (testdata/fuzz/<target>/<hash> in
# its package, given from the repository root, with its content) and the
# command that re-runs it; commit that file to keep it as a seed. A failing
# seed, or a fuzzing process that died, saves no new input: the target's
# output above says which.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzztime=${FUZZTIME:-2m}

# "<package dir> <target>" for each func Fuzz in a test file that go list
# says the package's tests build (build constraints honoured). Read from
# the source: `go test -list` links every test binary, 17 s on 2 cores.
mapfile -t targets < <(
  go list -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' ./... |
    xargs -r grep -Ho '^func Fuzz[A-Za-z0-9_]*(' |
    sed -E "s|^$root/(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\\(\$|\\1 \\2|" | sort
)
if ((${#targets[@]} == 0)); then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

# The inputs saved for a target, one a line; none before its first failure.
inputs() { if [[ -d $1 ]]; then find "$1" -type f | sort; fi; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# fuzz_one runs target $2 of package ./$1; its output goes to the terminal
# and to $log.
fuzz_one() {
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -fuzzminimizetime 2s "./$1" 2>&1 | tee "$log"
}

echo "fuzz: ${#targets[@]} targets, $fuzztime each"
failed=()
for t in "${targets[@]}"; do
  read -r rel f <<<"$t"
  corpus="$rel/testdata/fuzz/$f"
  before=$(inputs "$corpus")
  echo "fuzz: ./$rel $f for $fuzztime"
  if fuzz_one "$rel" "$f"; then
    continue
  fi
  saved=$(comm -13 <(echo "$before") <(inputs "$corpus") | grep . || true)
  # Go 1.26's fuzzing coordinator can report its own -fuzztime deadline as
  # a failure, with no input saved, when a worker is slow to stop at that
  # moment (golang/go#75804, fixed in Go 1.27): seen here on FuzzKubeconfig,
  # at 19 execs/s on a loaded machine. Such a failure is run once more.
  if [[ -z $saved ]] && grep -q '^ *context deadline exceeded$' "$log"; then
    echo "fuzz: $f stopped at its own deadline with no input saved (golang/go#75804): running it again"
    if fuzz_one "$rel" "$f"; then
      continue
    fi
    saved=$(comm -13 <(echo "$before") <(inputs "$corpus") | grep . || true)
  fi
  if [[ -z $saved ]]; then
    failed+=("$f in ./$rel: no new input saved (a seed failed, or the fuzzing process died: see its output above)")
    continue
  fi
  while read -r in; do
    failed+=("$f in ./$rel: failing input $in
    re-run: go test -run '^$f\$/^${in##*/}\$' ./$rel
    content:
$(head -c 2000 "$in" | sed 's/^/      /')")
  done <<<"$saved"
done

if ((${#failed[@]} > 0)); then
  printf '\nfuzz: %d of %d targets failed\n' "${#failed[@]}" "${#targets[@]}" >&2
  printf -- '- %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed"
