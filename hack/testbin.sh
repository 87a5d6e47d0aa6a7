#!/usr/bin/env bash
# testbin.sh builds the real binaries the integration tests run against
# (kube-apiserver, etcd, kwok, node-problem-detector) from their Go modules
# into a versioned cache directory outside the repository, plus the kwok
# stages file. It is idempotent: a binary that is already there is not
# rebuilt, so a second run takes seconds.
#
# Usage: hack/testbin.sh            build what is missing, print the directory
#        hack/testbin.sh --print    only print the directory
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
KUBE_STAGING_VERSION=${KUBE_STAGING_VERSION:-v0.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
NPD_VERSION=${NPD_VERSION:-v1.36.0}

# The directory name carries every version, so changing one builds a fresh set.
KEY="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_npd-${NPD_VERSION}"
CACHE_ROOT=${KUBEMEDIC_TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/kubemedic/testbin}
DIR="$CACHE_ROOT/$KEY"

if [[ "${1:-}" == "--print" ]]; then
  echo "$DIR"
  exit 0
fi

mkdir -p "$DIR"
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

build_apiserver() {
  local m="$WORK/apiserver"
  mkdir -p "$m"
  k8s_gomod
  cp "$WORK/apiserver-go.mod" "$m/go.mod"
  cat >"$m/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
  (cd "$m" && go mod tidy && go build -trimpath -o "$DIR/kube-apiserver.tmp" . && mv "$DIR/kube-apiserver.tmp" "$DIR/kube-apiserver")
}

build_kubectl() {
  # The same throwaway-module trick as kube-apiserver: k8s.io/kubectl is one
  # of the staging repos, so the version matches the API server exactly.
  local m="$WORK/kubectl"
  mkdir -p "$m"
  k8s_gomod
  sed 's|^module .*|module testbin/kubectl|' "$WORK/apiserver-go.mod" >"$m/go.mod"
  cat >"$m/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() { os.Exit(cli.Run(cmd.NewDefaultKubectlCommand())) }
GO
  (cd "$m" && go mod tidy && go build -trimpath -o "$DIR/kubectl.tmp" . && mv "$DIR/kubectl.tmp" "$DIR/kubectl")
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

echo "testbin: cache $DIR"
have etcd || run etcd "build etcd ${ETCD_VERSION} (about 30s)" build_etcd
have kube-apiserver || run kube-apiserver "build kube-apiserver ${KUBE_VERSION} (about 5 min on 2 cores)" build_apiserver
have kubectl || run kubectl "build kubectl ${KUBE_VERSION} (about 2 min)" build_kubectl
have kwok || run kwok "build kwok ${KWOK_VERSION} (about 1 min)" build_kwok
[[ -f "$DIR/kwok-stages.yaml" ]] && echo "testbin: kwok-stages.yaml present in $DIR" || run kwok-stages "write kwok stages (node-fast, heartbeat-with-lease, pod-fast)" kwok_stages
have node-problem-detector || run npd "build node-problem-detector ${NPD_VERSION} (about 2 min)" build_npd

for b in etcd kube-apiserver kubectl kwok node-problem-detector; do
  [[ -x "$DIR/$b" ]] || { STEP=verify; echo "testbin: $b missing after build" >&2; exit 1; }
done
echo "testbin: ready: $DIR"
