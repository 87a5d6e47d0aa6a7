# kubemedic — build, generate, test.
# `make test` and `make demo` are the two commands a newcomer needs.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# go-nvml's and go-dcgm's cgo preambles call NVML and DCGM functions their
# own headers mark deprecated: 29 gcc warnings (147 lines) on a first build,
# which read as a broken build. Only that warning is silenced, for every
# target (build, demo, test, images); Go's default -O2 -g is kept, and every
# other compiler warning stays visible. A CGO_CFLAGS of your own wins.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

CONTROLLER_GEN_VERSION ?= v0.20.0
STATICCHECK_VERSION    ?= v0.8.2
TOOLS_DIR  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubemedic/tools
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
STATICCHECK    := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)
KO_VERSION ?= v0.19.1
KO         := $(TOOLS_DIR)/ko-$(KO_VERSION)

# make images: where the images go and what they are called
# (IMAGE_REPO/kubemedic-remediator:IMAGE_TAG, ...). deploy/kustomization.yaml
# names the same repository and tag under images:. IMAGE_PUSH=false pushes
# nothing and writes the images to bin/images (an OCI image layout); the
# base images are pulled either way.
IMAGE_REPO      ?= $(or $(KO_DOCKER_REPO),ghcr.io/kubemedic)
IMAGE_TAG       ?= v0.1.0
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_PUSH      ?= true
IMAGE_CMDS      := ./cmd/kubemedic-detect ./cmd/kubemedic-remediator ./cmd/kubemedic-alertbridge ./cmd/kubemedic-janitor ./cmd/kubemedic ./cmd/kubemedic-diag ./cmd/kubemedic-validate
# The GPU tests' images (the validate-* NodeOperationTemplates):
# kubemedic-validate built once more on each tool's own image, as
# IMAGE_REPO/kubemedic-validate-<test>. The binary is static, so any base
# runs it; ko keeps the base's files, PATH and library paths and adds
# /ko-app/kubemedic-validate. KO_DEFAULTBASEIMAGE overrides .ko.yaml's
# defaultBaseImage for that one build (kubemedic-validate has no
# baseImageOverrides entry). Pinned by tag; pin by digest for a release.
VALIDATE_TESTS            := dcgm nccl nvbandwidth
VALIDATE_BASE_dcgm        ?= nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04
VALIDATE_BASE_nccl        ?= ghcr.io/coreweave/nccl-tests:12.8.1-devel-ubuntu22.04-nccl2.27.5-1-0120901
VALIDATE_BASE_nvbandwidth ?= $(VALIDATE_BASE_dcgm)

GO_TEST_FLAGS ?= -count=1 -timeout=20m

.PHONY: all build test unit testbin generate lint bench bench-detect bench-remediator bench-janitor bench-alertbridge fuzz demo install-kubectl-plugin tools images clean-testbin help

all: build

help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-18s %s\n", $$1, $$2}'

build: ## Build every binary into bin/
	@echo "build: building kubemedic into bin/ (first time: about 2 min on 2 cores; then seconds)"
	go build -o bin/ ./cmd/...

testbin: ## Build kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd, kwok, NPD, Prometheus, promtool, Alertmanager, amtool and versitygw (S3) into the versioned cache (idempotent)
	hack/testbin.sh

# go test -json through hack/testreport: the output of failing tests, the
# package lines, and every skipped test with its reason; a skip that
# hack/test-skips.txt does not allow (a missing capability) fails the run.
test: testbin $(CONTROLLER_GEN) ## Run every test, integration tests included, against a real kube-apiserver + etcd; only the skips in hack/test-skips.txt are allowed
	@mkdir -p $(TOOLS_DIR)
	go build -o $(TOOLS_DIR)/testreport ./hack/testreport
	KUBEMEDIC_TESTBIN="$$(hack/testbin.sh --print)" CONTROLLER_GEN=$(CONTROLLER_GEN) go test -json $(GO_TEST_FLAGS) ./... \
	  | $(TOOLS_DIR)/testreport -skips hack/test-skips.txt

unit: ## Run only the tests that need no test binaries
	go test -count=1 -short ./...

generate: $(CONTROLLER_GEN) ## Generate deepcopy code and CRDs from policies/v1alpha1
	$(CONTROLLER_GEN) object paths=./policies/v1alpha1/...
	$(CONTROLLER_GEN) crd paths=./policies/v1alpha1/... output:crd:dir=deploy/crds
	@echo "generate: wrote policies/v1alpha1/zz_generated.deepcopy.go and deploy/crds/"

lint: $(STATICCHECK) ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

bench: testbin ## Run the benchmarks
	KUBEMEDIC_TESTBIN="$$(hack/testbin.sh --print)" go test -run='^$$' -bench=. -benchmem ./...

bench-detect: ## Time whole kubemedic-detect invocations against hand-written shell plugins on large fixtures
	go run ./test/scale/detect

bench-remediator: testbin ## Measure the remediator at 5,000 kwok nodes and 100,000 pods: latency beyond a condition's for, peak RSS, API server memory, API requests, error logs (ARGS="-nodes 10000 -profile /tmp/prof"; "-nodes 300 -pods-per-node 5 -steady 20s": 1 min)
	KUBEMEDIC_TESTBIN="$$(hack/testbin.sh --print)" go run ./test/scale/remediator $(ARGS)

bench-janitor: testbin ## Measure the janitor at 2,000 kwok nodes, 50,000 GPU pods and a real Prometheus: cycle time, queries per cycle, peak RSS, API writes (ARGS="-nodes 200 -pods 2000 -steady 30s")
	KUBEMEDIC_TESTBIN="$$(hack/testbin.sh --print)" go run ./test/scale/janitor $(ARGS)

bench-alertbridge: ## 1,000 alert groups fire, resolve and re-fire through the alertbridge: GitHub calls per transition, webhook ack latency
	go run ./test/scale/alertbridge $(ARGS)

FUZZTIME ?= 2m
fuzz: ## Run every fuzz target for FUZZTIME each (make test runs only their seed corpora; .ci/run runs this with FUZZTIME=3s); a failure names the saved input
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

demo: testbin build ## Run the whole system locally: simulated GPU nodes, real NPD/Prometheus/Alertmanager, the components, GitHub and Slack stand-ins (Ctrl-C stops it)
	KUBEMEDIC_TESTBIN="$$(hack/testbin.sh --print)" bin/kubemedic-demo

KUBECTL_PLUGIN_DIR ?= $(HOME)/.local/bin

install-kubectl-plugin: build ## Link bin/kubemedic as kubectl-medic into $(KUBECTL_PLUGIN_DIR), so that `kubectl medic status` works
	mkdir -p "$(KUBECTL_PLUGIN_DIR)"
	ln -sf "$(CURDIR)/bin/kubemedic" "$(KUBECTL_PLUGIN_DIR)/kubectl-medic"
	@echo "kubectl medic: $(KUBECTL_PLUGIN_DIR)/kubectl-medic -> $(CURDIR)/bin/kubemedic (that directory must be on PATH)"

tools: $(CONTROLLER_GEN) $(STATICCHECK) ## Install the pinned dev tools into the cache

# Not part of build, test or CI. kubemedic-detect is a cgo build
# (deploy/images/cgo-cc picks the C compiler per GOARCH; arm64 needs
# Debian's gcc-aarch64-linux-gnu); the others are static. See .ko.yaml.
images: $(KO) ## Build multi-arch images of every binary with ko and push them to IMAGE_REPO (IMAGE_TAG, IMAGE_PLATFORMS; IMAGE_PUSH=false: only into bin/images)
	@mkdir -p bin
	KO_DOCKER_REPO=$(IMAGE_REPO) CC=$(CURDIR)/deploy/images/cgo-cc $(KO) build \
	  --base-import-paths --tags=$(IMAGE_TAG) --platform=$(IMAGE_PLATFORMS) --image-refs=bin/image-refs \
	  $(if $(filter false,$(IMAGE_PUSH)),--push=false --oci-layout-path=bin/images) \
	  $(IMAGE_CMDS)
	for tb in $(foreach t,$(VALIDATE_TESTS),$(t)=$(VALIDATE_BASE_$(t))); do \
	  KO_DOCKER_REPO=$(IMAGE_REPO)/kubemedic-validate-$${tb%%=*} KO_DEFAULTBASEIMAGE=$${tb#*=} $(KO) build \
	    --bare --tags=$(IMAGE_TAG) --platform=$(IMAGE_PLATFORMS) --image-refs=bin/image-refs-validate-$${tb%%=*} \
	    $(if $(filter false,$(IMAGE_PUSH)),--push=false --oci-layout-path=bin/images) \
	    ./cmd/kubemedic-validate; \
	done
	@echo "images: built $(IMAGE_REPO)/*:$(IMAGE_TAG) for $(IMAGE_PLATFORMS); references in bin/image-refs*"

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS_DIR)
	@echo "tools: installing controller-gen $(CONTROLLER_GEN_VERSION)"
	GOBIN=$(TOOLS_DIR)/tmp-cg GOFLAGS= go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_DIR)/tmp-cg/controller-gen $@ && rmdir $(TOOLS_DIR)/tmp-cg

$(STATICCHECK):
	@mkdir -p $(TOOLS_DIR)
	@echo "tools: installing staticcheck $(STATICCHECK_VERSION)"
	GOBIN=$(TOOLS_DIR)/tmp-sc GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS_DIR)/tmp-sc/staticcheck $@ && rmdir $(TOOLS_DIR)/tmp-sc

$(KO):
	@mkdir -p $(TOOLS_DIR)
	@echo "tools: installing ko $(KO_VERSION)"
	GOBIN=$(TOOLS_DIR)/tmp-ko GOFLAGS= go install github.com/google/ko@$(KO_VERSION)
	mv $(TOOLS_DIR)/tmp-ko/ko $@ && rmdir $(TOOLS_DIR)/tmp-ko

clean-testbin: ## Remove the cached test binaries
	rm -rf "$$(dirname "$$(hack/testbin.sh --print)")"
