#!/usr/bin/env bash
# testbin.sh builds the real binaries the integration tests run against
# (kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd,
# kwok, node-problem-detector, Prometheus
# with promtool, Alertmanager with amtool, the versitygw S3 gateway) from
# their Go modules into a
# versioned cache directory outside the repository, plus the kwok stages
# file. It is idempotent: a binary that is already there is not rebuilt, so
# a second run takes seconds.
#
# Prometheus and Alertmanager live in sibling directories keyed by their own
# versions and are symlinked into the main directory, so that bumping one of
# them rebuilds only it (and bumping Kubernetes does not rebuild them). So do
# the third-party CRDs the tests install (Cluster API's Cluster, Machine,
# MachineSet and MachineHealthCheck from its module, Metal3's BareMetalHost
# generated with controller-gen from its Go types): the directory
# thirdparty-crds in the main directory links to them. The
# keys carry versions only: after changing how something is built (tags,
# flags), run `make clean-testbin`.
#
# Usage: hack/testbin.sh            build what is missing, print the directory
#        hack/testbin.sh --print    only print the directory
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
KUBE_STAGING_VERSION=${KUBE_STAGING_VERSION:-v0.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
NPD_VERSION=${NPD_VERSION:-v1.36.0}
# Prometheus 3.x is published as module versions v0.3xx.y (v0.316.0 is 3.16.0).
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
ALERTMANAGER_VERSION=${ALERTMANAGER_VERSION:-v0.35.0}
# Third-party CRDs. Metal3 publishes only its apis module (Go types, no YAML),
# so its CRD is generated with controller-gen, the Makefile's version.
CAPI_VERSION=${CAPI_VERSION:-v1.14.2}
METAL3_APIS_VERSION=${METAL3_APIS_VERSION:-v0.10.2}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.20.0}
# The S3-compatible store the diagnostics tests upload to: versitygw (Apache
# 2.0), a gateway whose posix backend keeps objects as files. Not the MinIO
# server (AGPL).
VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}

# The directory name carries every version, so changing one builds a fresh set.
KEY="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_npd-${NPD_VERSION}"
CACHE_ROOT=${KUBEMEDIC_TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/kubemedic/testbin}
DIR="$CACHE_ROOT/$KEY"
PROM_DIR="$CACHE_ROOT/prometheus-${PROMETHEUS_VERSION}"
AM_DIR="$CACHE_ROOT/alertmanager-${ALERTMANAGER_VERSION}"
VGW_DIR="$CACHE_ROOT/versitygw-${VERSITYGW_VERSION}"
CRD_DIR="$CACHE_ROOT/crds-capi-${CAPI_VERSION}_metal3-${METAL3_APIS_VERSION}_controller-gen-${CONTROLLER_GEN_VERSION}"
# The CRD files taken from Cluster API's module (core/config/crd/bases).
CAPI_CRDS=(clusters machines machinesets machinehealthchecks)

if [[ "${1:-}" == "--print" ]]; then
  echo "$DIR"
  exit 0
fi

mkdir -p "$DIR" "$PROM_DIR" "$AM_DIR" "$VGW_DIR" "$CACHE_ROOT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubemedic-testbin.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

STEP=""
fail() {
  echo "testbin: FAILED at step '$STEP' (log: $WORK/$STEP.log kept at $DIR/last-failure.log)" >&2
  [[ -f "$WORK/$STEP.log" ]] && { tail -n 40 "$WORK/$STEP.log" >&2; cp "$WORK/$STEP.log" "$DIR/last-failure.log"; }
  exit 1
}

# run STEP MESSAGE CMD... runs CMD with its output in a log and names the step on failure.
run() {
  STEP=$1; shift
  local msg=$1; shift
  local start=$SECONDS
  printf 'testbin: %-16s %s ... ' "$STEP" "$msg"
  if ! "$@" >"$WORK/$STEP.log" 2>&1; then
    echo "error"
    fail
  fi
  echo "done ($((SECONDS - start))s)"
}

have() { [[ -x "$DIR/$1" ]] && echo "testbin: $1 present in $DIR" ; }

build_etcd() {
  local m="$WORK/etcd"
  mkdir -p "$m"
  cat >"$m/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$m" && go mod init testbin/etcd && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" \
    && go mod tidy && go build -trimpath -o "$DIR/etcd.tmp" . && mv "$DIR/etcd.tmp" "$DIR/etcd")
}

# k8s_gomod writes $WORK/apiserver-go.mod: a module that requires
# k8s.io/kubernetes and pins every staging repo it replaces with ./staging/...
# to the published version of the same release.
k8s_gomod() {
  [[ -f "$WORK/apiserver-go.mod" ]] && return 0
  (cd "$WORK" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}") >"$WORK/k8s.json"
  local gomod
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$WORK/k8s.json")
  [[ -f "$gomod" ]] || { echo "no go.mod for k8s.io/kubernetes@${KUBE_VERSION}"; return 1; }
  {
    echo "module testbin/apiserver"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$gomod" | awk -v v="$KUBE_STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >"$WORK/apiserver-go.mod"
}

# KUBE_BINS are the Kubernetes binaries built from k8s.io/kubernetes, each
# from the main package of the same name under its cmd/.
KUBE_BINS=(kube-apiserver kube-scheduler kube-controller-manager kubectl)

# build_kube NAME... builds the named Kubernetes binaries in one `go build`
# of one throwaway module: they share most of their packages (client-go,
# apiserver, the API types), which one build compiles once and links into
# each. Each binary's main package is Kubernetes' own cmd/NAME, copied from
# the module (with its tzdata, JSON-log and metrics registrations), and the
# version is stamped as release builds stamp it, so /version and --version
# say KUBE_VERSION.
build_kube() {
  local m="$WORK/kube" out="$WORK/kube-bin" src name pkgs=() minor
  mkdir -p "$m" "$out" || return 1
  k8s_gomod || return 1
  sed 's|^module .*|module testbin/kube|' "$WORK/apiserver-go.mod" >"$m/go.mod" || return 1
  src=$(module_dir "k8s.io/kubernetes@${KUBE_VERSION}") || return 1
  for name in "$@"; do
    mkdir -p "$m/$name" || return 1
    find "$src/cmd/$name" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec cp {} "$m/$name/" \; || return 1
    chmod u+w "$m/$name"/*.go || return 1
    pkgs+=("./$name")
  done
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  (cd "$m" && go mod tidy && go build -trimpath -o "$out/" \
    -ldflags "-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean" \
    "${pkgs[@]}") || return 1
  for name in "$@"; do
    mv "$out/$name" "$DIR/$name" || return 1
  done
}

build_kwok() {
  local m="$WORK/kwok"
  mkdir -p "$m"
  (cd "$m" && go mod init testbin/kwok && go get "sigs.k8s.io/kwok@${KWOK_VERSION}" \
    && go build -trimpath -o "$DIR/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok && mv "$DIR/kwok.tmp" "$DIR/kwok")
}

kwok_stages() {
  local src m="$WORK/kwok-stages"
  mkdir -p "$m"
  (cd "$m" && go mod init testbin/kwokstages >/dev/null 2>&1 || true)
  local dirjson
  dirjson=$(cd "$m" && go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}")
  src=$(echo "$dirjson" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  local out="$DIR/kwok-stages.yaml.tmp"
  : >"$out"
  for s in node/fast node/heartbeat-with-lease pod/fast; do
    local f
    for f in "$src/kustomize/stage/$s"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      echo "---" >>"$out"
      cat "$f" >>"$out"
    done
  done
  grep -q 'kind: Stage' "$out" || { echo "no Stage found under $src/kustomize/stage"; return 1; }
  mv "$out" "$DIR/kwok-stages.yaml"
}

build_npd() {
  local m="$WORK/npd"
  mkdir -p "$m"
  (cd "$m" && go mod init testbin/npd && go get "k8s.io/node-problem-detector@${NPD_VERSION}" \
    && go build -trimpath -o "$DIR/node-problem-detector.tmp" k8s.io/node-problem-detector/cmd/nodeproblemdetector \
    && mv "$DIR/node-problem-detector.tmp" "$DIR/node-problem-detector")
}

# module_dir MODULE@VERSION prints the module's directory in the module cache,
# downloading it first.
module_dir() {
  local json
  json=$(cd "$WORK" && go mod download -json "$1") || return 1
  echo "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'
}

# version_ldflags DIR prints the -ldflags that stamp the version of the
# Prometheus project whose source is in DIR (its VERSION file) into a binary,
# as its own release builds do, so that --version and build_info are right.
version_ldflags() {
  echo "-X github.com/prometheus/common/version.Version=$(tr -d '[:space:]' <"$1/VERSION")"
}

build_prometheus() {
  # go install from the module itself: its go.mod has no replace directives,
  # so this builds with exactly the dependency versions it was released with.
  # remove_all_sd leaves out every service discovery but static, file and
  # http (the cloud ones double the binary and the build time); the web UI
  # is served from files that are not there (no builtinassets tag): tests use
  # the API only.
  local src
  src=$(module_dir "github.com/prometheus/prometheus@${PROMETHEUS_VERSION}") || return 1
  mkdir -p "$WORK/prometheus-bin" || return 1
  GOFLAGS= GOBIN="$WORK/prometheus-bin" go install -trimpath -tags remove_all_sd -ldflags "$(version_ldflags "$src")" \
    "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_VERSION}" \
    "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}" \
    && mv "$WORK/prometheus-bin/prometheus" "$WORK/prometheus-bin/promtool" "$PROM_DIR/"
}

build_alertmanager() {
  # Alertmanager's ui package embeds ui/app/dist (//go:embed app/dist), which
  # its release process builds with npm and which is not committed, so not in
  # the module zip either: building from the module fails with "pattern
  # app/dist: no matching files found". Build a copy of the module's source
  # instead, with a placeholder page where the UI would be (the tests use the
  # API only), as the main module with its own go.mod and go.sum.
  local src m="$WORK/alertmanager-src"
  src=$(module_dir "github.com/prometheus/alertmanager@${ALERTMANAGER_VERSION}") || return 1
  cp -R "$src" "$m" && chmod -R u+w "$m" || return 1
  local d
  for d in elm mantine; do
    mkdir -p "$m/ui/app/dist/$d" || return 1
    echo '<!doctype html><title>Alertmanager</title><p>Web UI not built (kubemedic hack/testbin.sh); the API is at /api/v2/.</p>' \
      >"$m/ui/app/dist/$d/index.html" || return 1
  done
  mkdir -p "$WORK/alertmanager-bin" || return 1
  (cd "$m" && GOFLAGS= go build -trimpath -ldflags "$(version_ldflags "$m")" -o "$WORK/alertmanager-bin/" ./cmd/alertmanager ./cmd/amtool) \
    && mv "$WORK/alertmanager-bin/alertmanager" "$WORK/alertmanager-bin/amtool" "$AM_DIR/"
}

build_versitygw() {
  # go install from the module: its go.mod has no replace directives.
  mkdir -p "$WORK/versitygw-bin" || return 1
  GOFLAGS= GOBIN="$WORK/versitygw-bin" go install -trimpath "github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}" \
    && mv "$WORK/versitygw-bin/versitygw" "$VGW_DIR/"
}

# controller_gen prints the path of controller-gen ${CONTROLLER_GEN_VERSION}:
# $CONTROLLER_GEN when set (the Makefile's), else the one `make tools`
# installs, else one built into $WORK.
controller_gen() {
  local cg=${CONTROLLER_GEN:-${XDG_CACHE_HOME:-$HOME/.cache}/kubemedic/tools/controller-gen-${CONTROLLER_GEN_VERSION}}
  if [[ ! -x "$cg" ]]; then
    cg="$WORK/controller-gen-bin/controller-gen"
    [[ -x "$cg" ]] || GOBIN="$WORK/controller-gen-bin" GOFLAGS= \
      go install "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_GEN_VERSION}" >&2 || return 1
  fi
  echo "$cg"
}

build_thirdparty_crds() {
  local out="$CRD_DIR.tmp" capi metal3 m="$WORK/metal3-apis" cg name
  rm -rf "$out" && mkdir -p "$out" || return 1
  capi=$(module_dir "sigs.k8s.io/cluster-api@${CAPI_VERSION}") || return 1
  for name in "${CAPI_CRDS[@]}"; do
    cp "$capi/core/config/crd/bases/cluster.x-k8s.io_$name.yaml" "$out/" || return 1
  done
  # The apis module's go.mod replaces its sibling hardwareutils module with
  # ../pkg/hardwareutils, which is not in the module zip: drop the local
  # replaces so that the required (published) version is used.
  metal3=$(module_dir "github.com/metal3-io/baremetal-operator/apis@${METAL3_APIS_VERSION}") || return 1
  cp -R "$metal3" "$m" && chmod -R u+w "$m" || return 1
  local repl
  for repl in $(sed -nE 's/^[[:space:]]*(replace[[:space:]]+)?([^[:space:]]+)([[:space:]]+[^[:space:]]+)?[[:space:]]+=>[[:space:]]+\.\.?\/.*/\2/p' "$m/go.mod"); do
    (cd "$m" && go mod edit -dropreplace="$repl") || return 1
  done
  cg=$(controller_gen) || return 1
  # allowDangerousTypes: BareMetalHost has a float field (CPU clock speed),
  # which controller-gen refuses without it.
  (cd "$m" && go mod tidy && "$cg" crd:allowDangerousTypes=true paths=./metal3.io/v1alpha1/... output:crd:dir="$WORK/metal3-crds") || return 1
  cp "$WORK/metal3-crds/metal3.io_baremetalhosts.yaml" "$out/" && chmod u+w "$out"/*.yaml || return 1
  rm -rf "$CRD_DIR" && mv "$out" "$CRD_DIR"
}

# link DIR NAME... symlinks each DIR/NAME into $DIR, replacing a link to
# another version; the tests find every binary in $DIR.
link() {
  local from=$1 name target; shift
  for name in "$@"; do
    target="../$(basename "$from")/$name"
    [[ -L "$DIR/$name" && "$(readlink "$DIR/$name")" == "$target" ]] && continue
    ln -sfn "$target" "$DIR/$name"
  done
}

echo "testbin: cache $DIR"
if [[ ! -x "$DIR/kube-apiserver" ]]; then
  # Measured on 2 cores from empty Go build and module caches, downloads
  # included: 563 s.
  echo "testbin: first run: building the real components from source, about 10 minutes on 2 cores, once; later runs take seconds"
fi
have etcd || run etcd "build etcd ${ETCD_VERSION} (about 1 min)" build_etcd
# The Kubernetes binaries: one go build for all that are missing. Measured
# on 2 cores from empty caches, module downloads included: all four in 219 s
# (kube-apiserver alone took about 200 s); kube-scheduler and
# kube-controller-manager with the others' packages compiled: 50 s.
kube_missing=()
for b in "${KUBE_BINS[@]}"; do
  have "$b" || kube_missing+=("$b")
done
if ((${#kube_missing[@]} > 0)); then
  kube_time="about 1 min"
  [[ " ${kube_missing[*]} " == *" kube-apiserver "* ]] && kube_time="about 4 min on 2 cores"
  run kube "build ${kube_missing[*]} ${KUBE_VERSION} in one go build ($kube_time)" build_kube "${kube_missing[@]}"
fi
have kwok || run kwok "build kwok ${KWOK_VERSION} (about 1 min)" build_kwok
[[ -f "$DIR/kwok-stages.yaml" ]] && echo "testbin: kwok-stages.yaml present in $DIR" || run kwok-stages "write kwok stages (node-fast, heartbeat-with-lease, pod-fast)" kwok_stages
have node-problem-detector || run npd "build node-problem-detector ${NPD_VERSION} (about 1 min)" build_npd
if [[ -x "$PROM_DIR/prometheus" && -x "$PROM_DIR/promtool" ]]; then
  echo "testbin: prometheus, promtool present in $PROM_DIR"
else
  run prometheus "build prometheus, promtool ${PROMETHEUS_VERSION} (about 2 min)" build_prometheus
fi
link "$PROM_DIR" prometheus promtool
if [[ -x "$AM_DIR/alertmanager" && -x "$AM_DIR/amtool" ]]; then
  echo "testbin: alertmanager, amtool present in $AM_DIR"
else
  run alertmanager "build alertmanager, amtool ${ALERTMANAGER_VERSION} (about 30 s)" build_alertmanager
fi
link "$AM_DIR" alertmanager amtool
if [[ -x "$VGW_DIR/versitygw" ]]; then
  echo "testbin: versitygw present in $VGW_DIR"
else
  run versitygw "build versitygw ${VERSITYGW_VERSION} (the diagnostics tests' S3 store; about 1 min)" build_versitygw
fi
link "$VGW_DIR" versitygw
if [[ -f "$CRD_DIR/metal3.io_baremetalhosts.yaml" ]]; then
  echo "testbin: third-party CRDs present in $CRD_DIR"
else
  run thirdparty-crds "CRDs of Cluster API ${CAPI_VERSION}, Metal3 ${METAL3_APIS_VERSION} (about 10 s; 1.5 min if controller-gen must be built)" build_thirdparty_crds
fi
if [[ "$(readlink "$DIR/thirdparty-crds" 2>/dev/null)" != "../$(basename "$CRD_DIR")" ]]; then
  ln -sfn "../$(basename "$CRD_DIR")" "$DIR/thirdparty-crds"
fi

for b in etcd "${KUBE_BINS[@]}" kwok node-problem-detector prometheus promtool alertmanager amtool versitygw; do
  [[ -x "$DIR/$b" ]] || { STEP=verify; echo "testbin: $b missing after build" >&2; exit 1; }
done
for f in "${CAPI_CRDS[@]/#/cluster.x-k8s.io_}" metal3.io_baremetalhosts; do
  [[ -f "$DIR/thirdparty-crds/$f.yaml" ]] || { STEP=verify; echo "testbin: thirdparty-crds/$f.yaml missing after build" >&2; exit 1; }
done
echo "testbin: ready: $DIR"
