# resize-guard — every command a person or CI needs. `make help` lists the targets by purpose, each
# with one line from its `## ` comment; the comment above a target says more. Recipes longer than a
# few lines are scripts under scripts/; each upstream part the builds and tests use (kube-apiserver,
# helm, VPA, ...) lives in third_party/<part>/ with its Go module and its build.sh
# (third_party/README.md).

.DEFAULT_GOAL := help
CARGO ?= cargo
comma := ,
# Cargo's target directory as cargo resolves it (CARGO_TARGET_DIR, .cargo/config.toml or ./target),
# for the recipes that run built binaries by path; evaluated only where used.
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps --locked \
	| python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
# The debug programs the test and lab recipes run (the demos, upstream's e2e runner, the lab's
# tools): one build of the workspace's binaries, its features resolved as `cargo test --workspace`
# resolves them (`--examples` selects no target here but has cargo count the dev-dependencies'
# features), so after the tests' build it compiles only the binaries the tests did not link; each
# is then run from $(TARGET_DIR)/debug. (`cargo run -p` would resolve one package's features and
# rebuild much of the dependency tree.)
DEBUG_BINS = $(CARGO) build --locked --workspace --bins --examples

# --- Upstream parts ----------------------------------------------------------------------------
# $(call with,PART,VAR[,FILE[,ENV]]): VAR set to the directory third_party/PART/build.sh prints
# as its last line, or to FILE in it (ENV: assignments for the build script). The part is built
# on first use (minutes; its build.sh says how long) and reused from its stamp cache under
# ~/.cache/resize-guard after (~0.1 s). The tests read VAR; without it they fail with the command.
with = $(2)="$$($(if $(4),$(4) )third_party/$(1)/build.sh | tail -n 1)$(if $(3),/$(3))"
# kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kubectl and hollow-node of the
# minor RESIZE_GUARD_K8S_VERSION names (default 1.37).
WITH_K8S = $(call with,control-plane,RESIZE_GUARD_K8S_BIN_DIR)
# The same for one given minor: $(call with_k8s,1.35).
with_k8s = RESIZE_GUARD_K8S_VERSION=$(1) $(call with,control-plane,RESIZE_GUARD_K8S_BIN_DIR,,RESIZE_GUARD_K8S_VERSION=$(1))
WITH_HELM = $(call with,helm,RESIZE_GUARD_HELM_BIN,helm)
# VPA's recommender, updater and admission-controller, with VPA's CRD and RBAC files.
WITH_VPA = $(call with,vpa,RESIZE_GUARD_VPA_DIR)
WITH_REGISTRY = $(call with,registry,RESIZE_GUARD_REGISTRY_BIN,registry)
WITH_COSIGN = $(call with,cosign,RESIZE_GUARD_COSIGN_BIN,cosign)
# A real node's kubelet, kube-proxy, containerd, runc, CNI plugins and pause (tests/node/).
WITH_NODE = $(call with,node,RESIZE_GUARD_NODE_BIN_DIR)
WITH_PROMTOOL = $(call with,promtool,RESIZE_GUARD_PROMTOOL_BIN,promtool)
WITH_METRICS_SERVER = $(call with,metrics-server,RESIZE_GUARD_METRICS_SERVER_BIN,metrics-server)
# Kubernetes' own in-place resize e2e specs as one test binary, beside the BusyBox image they run.
WITH_UPSTREAM_E2E = $(call with,upstream-e2e,RESIZE_GUARD_UPSTREAM_E2E_BIN,resize-e2e.test)
# The parts the suites of make e2e-local use (the variables its recipe passes): the rest serve
# only the suites of make e2e-images and upstream's e2e.
LOCAL_PARTS = control-plane helm vpa promtool metrics-server
# The parts the suites of make e2e-images use beside the control plane and metrics-server.
IMAGE_PARTS = qemu registry cosign node krew
# Every part, in the order make upstream builds them: the release build's cross toolchain first,
# so make image finds it ready, then those make e2e-local needs, then make e2e-images', and last
# upstream's resize e2e specs, which only make upstream-e2e-short (the last step of make test) runs.
UPSTREAM_PARTS = cross $(LOCAL_PARTS) $(IMAGE_PARTS) mdbook upstream-e2e

.PHONY: help image plugins krew push sign docs docs-check test release-check fmt fmt-check clippy deps-check unit e2e \
	e2e-local e2e-images \
	upstream-e2e-short test-versions test-matrix flood fuzz upstream-e2e demo demo-node demo-vpa \
	vpa-lag sandbox rss bench bench-report bench-scale upstream control-plane vpa

# `make -s print-VAR`: VAR's value, for scripts (.ci/run asks for TEST_PLATFORMS).
print-%:
	@echo '$($*)'

# Every target with a `## ` comment, under its `##@ ` section.
help:
	@echo "usage: make <target> [VAR=value ...] (the comment above a target in the Makefile says more)"
	@awk 'BEGIN { FS = ":[^#]*## " } /^##@ / { printf "\n%s\n", substr($$0, 5) } \
		/^[a-z][a-z0-9-]*:[^=]*## / { printf "  %-19s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

##@ Product: the release binaries, images and kubectl plugin (target/image/)

# Static (musl), stripped release binaries for PLATFORMS, cross-compiled without root by zig
# (cargo-zigbuild) under cargo-auditable (third_party/cross/build.sh installs them), and the
# images from deploy/image/Containerfile without a container engine:
# target/image/resize-guard-{webhook,controller}-<version>.oci.tar (OCI image index, one manifest
# per platform, tagged <version>-g<commit>; RELEASE=1: <version>), each image's CycloneDX SBOM
# (.cdx.json, from the binaries' embedded dependency trees), the kubectl plugin as
# kubectl-resize_guard-<version>-linux-<arch>.tar.gz (+ .sha256) and the krew manifest
# target/image/resize-guard.yaml listing those archives (scripts/image.sh).
PLATFORMS ?= linux/amd64 linux/arm64
# make test's platform: this machine's CPU, the one its tests run natively (make release-check
# builds and checks every one).
TEST_PLATFORMS ?= linux/$(if $(filter aarch64 arm64,$(shell uname -m)),arm64,amd64)
image: ## release binaries, OCI images + SBOMs, plugin archives (PLATFORMS=, RELEASE=1)
	PLATFORMS="$(PLATFORMS)" RELEASE="$(RELEASE)" CARGO="$(CARGO)" scripts/image.sh

# make image, plus the kubectl plugin for PLUGIN_PLATFORMS (.tar.gz; .zip for Windows) and the
# krew manifest listing every archive (minutes a platform; make test builds none of them).
PLUGIN_PLATFORMS ?= darwin/amd64 darwin/arm64 windows/amd64
plugins: image ## make image, plus the kubectl plugin for macOS and Windows (PLUGIN_PLATFORMS=)
	PLATFORMS="$(PLATFORMS)" PLUGIN_PLATFORMS="$(PLUGIN_PLATFORMS)" CARGO="$(CARGO)" scripts/plugins.sh

# The krew manifest `make image` or `make plugins` wrote, checked by krew's own
# validate-krew-manifest (built from sigs.k8s.io/krew's Go module by third_party/krew/build.sh;
# structure, platforms, no overlaps; the install half needs the archives at their release URLs,
# so it is skipped here; tests/e2e/images/krew.rs installs them from a local server).
KREW_MANIFEST = target/image/resize-guard.yaml
krew: ## validate target/image/resize-guard.yaml with krew's validate-krew-manifest
	@test -f $(KREW_MANIFEST) || { echo "make krew: no $(KREW_MANIFEST): run make image (or make plugins) first" >&2; exit 2; }
	"$$(third_party/krew/build.sh | tail -n 1)/validate-krew-manifest" -manifest $(KREW_MANIFEST) -skip-install

##@ Install: put the images where a cluster pulls them

# Both images pushed with the OCI distribution API (scripts/push.sh), each with its CycloneDX SBOM
# as an OCI artifact referring to it (NO_SBOM=1: without); credentials from docker/podman login
# (files, credential helpers, identity tokens); prints the kustomize images: block and the Helm
# --set flags that pin what it pushed.
push: ## push both images: REGISTRY=host[:port]/ns [TAG=] [PLAIN_HTTP=1] [NO_SBOM=1]
	REGISTRY="$(REGISTRY)" TAG="$(TAG)" PLAIN_HTTP="$(PLAIN_HTTP)" NO_SBOM="$(NO_SBOM)" CARGO="$(CARGO)" scripts/push.sh

# What make push pushed, signed with cosign (scripts/sign.sh): KEY is a cosign key file (with
# COSIGN_PASSWORD) or a KMS URI; TLOG=0: no transparency log; SIGNATURE_FORMAT=legacy: cosign's
# older .sig tag; COSIGN=path: that cosign, else v3 from third_party/cosign. docs/src/signing.md:
# verifying, and admission policies that check it.
SIGNATURE_FORMAT ?= bundle
sign: ## sign what make push pushed: REGISTRY=... KEY=cosign.key|kms-uri [TLOG=0]
	@REGISTRY="$(REGISTRY)" KEY="$(KEY)" TLOG="$(TLOG)" SIGNATURE_FORMAT="$(SIGNATURE_FORMAT)" \
		PLAIN_HTTP="$(PLAIN_HTTP)" COSIGN="$(COSIGN)" CARGO="$(CARGO)" scripts/sign.sh

##@ Docs: the book under docs/ (mdBook), its reference pages generated from the code

# The reference pages docs/src/reference/{policy,metrics,events}.md written from the code by
# docs/tool (the policy types, both programs' metric registries, the Event reason enum), then the
# book built by the pinned mdBook (third_party/mdbook/build.sh installs it on first use) into
# target/book/ (open target/book/index.html).
MDBOOK = "$$(third_party/mdbook/build.sh | tail -n 1)/mdbook"
docs: ## write the reference pages from the code, build the book into target/book/
	$(DEBUG_BINS)
	$(TARGET_DIR)/debug/resize-guard-docs generate
	$(MDBOOK) build docs

# Fails, listing the differences, when a committed reference page differs from what the code
# generates, and on a dead relative link or #anchor in the Markdown (http(s) links are not
# fetched); then builds the book (a chapter docs/src/SUMMARY.md lists without its file fails it).
# The check is docs/tool's own tests (`resize-guard-docs check` in process), built as part of the
# workspace's test build (`--workspace`: its features), so make unit compiles nothing twice.
docs-check: ## fail on a stale reference page or a dead link; build the book
	$(CARGO) test --workspace --locked -q --bin resize-guard-docs
	$(MDBOOK) build docs

##@ Test

# Lint, the fast tier (before anything is built), then the end-to-end suites against a real
# kube-apiserver v1.37.2 + etcd (built from Go modules on first use): first those that run the
# programs of the debug build (e2e-local), then make image for this machine's platform
# (TEST_PLATFORMS) and the suites that read or run those images (e2e-images), and the short subset
# of Kubernetes' own resize e2e specs on the real node. The other platforms' images and plugins
# are built and checked by `make release-check`: CI has no room for four more release builds.
test: PLATFORMS = $(TEST_PLATFORMS)
test: fmt-check clippy deps-check docs-check unit e2e-local e2e-images upstream-e2e-short ## everything CI runs

# Before a release: every platform's images and plugin archives, each checked by the images suites
# (the Mach-O and PE headers of the macOS and Windows plugins included).
release-check: plugins ## make plugins, then the images suites on every archive built
	$(MAKE) e2e SUITES=images

fmt: ## rustfmt the workspace
	$(CARGO) fmt --all

fmt-check: ## rustfmt --check; comments within 100 columns
	$(CARGO) fmt --all -- --check
	scripts/comment-width.sh

# `--all-targets` leaves out the e2e binary (`test = false`), so it is named.
clippy: ## clippy -D warnings on every target and the e2e binary
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) clippy --workspace --test e2e --locked -- -D warnings

deps-check: ## the policy crate has no kube/tokio/hyper dependency; upstream's mirrors stay walled
	@CARGO="$(CARGO)" scripts/deps-check.sh

# The fast tier: every crate's unit and in-process tests (`cargo test --workspace`; tests/e2e's
# binary is `test = false` and runs only when named). It needs nothing built and nothing running,
# and runs so: every variable naming an upstream part (UPSTREAM_VARS) unset, and the parts' cache
# root and HOME empty temporary directories, so no build script or ~/.cache/resize-guard can
# supply one; whatever needs a part, an image or a cluster belongs in tests/e2e or the lab.
UPSTREAM_VARS = RESIZE_GUARD_K8S_BIN_DIR RESIZE_GUARD_K8S_VERSION RESIZE_GUARD_HELM_BIN \
	RESIZE_GUARD_HELM_DIR RESIZE_GUARD_VPA_DIR RESIZE_GUARD_REGISTRY_BIN RESIZE_GUARD_REGISTRY_DIR \
	RESIZE_GUARD_COSIGN_BIN RESIZE_GUARD_COSIGN_DIR RESIZE_GUARD_NODE_BIN_DIR \
	RESIZE_GUARD_PROMTOOL_BIN RESIZE_GUARD_PROMTOOL_DIR RESIZE_GUARD_METRICS_SERVER_BIN \
	RESIZE_GUARD_UPSTREAM_E2E_BIN RESIZE_GUARD_KREW_DIR RESIZE_GUARD_QEMU_DIR \
	RESIZE_GUARD_CROSS_DIR RESIZE_GUARD_BIN_DIR
unit: ## the fast tier: unit and in-process tests, needing nothing built or running
	@empty="$$(mktemp -d)" && trap 'rm -rf "$$empty"' EXIT && mkdir "$$empty/cache" "$$empty/home" && \
	echo "unit: no upstream part's variable set; RESIZE_GUARD_CACHE_DIR and HOME empty ($$empty)" && \
	env $(foreach v,$(UPSTREAM_VARS),-u $(v)) RESIZE_GUARD_CACHE_DIR="$$empty/cache" \
		CARGO_HOME="$${CARGO_HOME:-$$HOME/.cargo}" RUSTUP_HOME="$${RUSTUP_HOME:-$$HOME/.rustup}" \
		HOME="$$empty/home" $(CARGO) test --workspace --locked

# The end-to-end suites (tests/e2e), one process per suite, E2E_JOBS of them at a time (longest
# first; most of a suite's time is spent waiting on its cluster); SUITES=admission,vpa::updater
# picks some (a substring of the module path), ARGS="--nocapture" goes to the test binary. The
# images suites read what make image or make plugins wrote for this commit (make test runs those
# first; a missing or stale target/image fails naming the command).
# SKIP=real_node leaves out the suites whose path contains a word of it.
SUITES ?=
SKIP ?=
E2E_JOBS ?= 3
E2E_RUN = CARGO="$(CARGO)" JOBS=$(E2E_JOBS) tests/e2e/run.sh
e2e: ## the end-to-end suites (SUITES=a,b SKIP=c E2E_JOBS=3 ARGS=...)
	$(call with_k8s,1.37) $(WITH_HELM) $(WITH_VPA) $(WITH_REGISTRY) $(WITH_COSIGN) $(WITH_NODE) $(WITH_PROMTOOL) $(WITH_METRICS_SERVER) \
		SKIP="$(subst $(comma), ,$(SKIP))" $(E2E_RUN) $(subst $(comma), ,$(SUITES)) $(if $(ARGS),-- $(ARGS))

# The suites that read or run make image's output: the images suites, and the real node's (it
# pulls the images). make test runs the others first (e2e-local), then these after make image.
IMAGE_SUITES = images real_node
e2e-local: ## the end-to-end suites that need no image (all but IMAGE_SUITES), only LOCAL_PARTS
	$(call with_k8s,1.37) $(WITH_HELM) $(WITH_VPA) $(WITH_PROMTOOL) $(WITH_METRICS_SERVER) \
		SKIP="$(IMAGE_SUITES)" $(E2E_RUN)

e2e-images: PLATFORMS = $(TEST_PLATFORMS)
e2e-images: image ## make image for TEST_PLATFORMS, then the suites that read or run it
	$(MAKE) e2e SUITES="$(IMAGE_SUITES)"

# The short subset of Kubernetes v1.37.2's own resize e2e specs (tests/lab/src/bin/upstream_e2e.rs
# SHORT: a spec or two of every group, and upstream's resize preemption spec with its gate off),
# with resize-guard installed only; part of make test (about 3 minutes; needs root).
upstream-e2e-short: image ## a short subset of upstream's resize e2e specs on the real node (root)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(WITH_UPSTREAM_E2E) \
		$(TARGET_DIR)/debug/resize-guard-upstream-e2e --mode with --short

# The version-sensitive suite on v1.35, the first minor where in-place resize is GA (`make test` runs
# it on v1.37 with everything else; `make test-matrix` on every minor). Its control plane is built
# on first use (~7 min cold): a cold CI run on 2 cores cannot also afford it inside 60 minutes.
test-versions: ## the version-sensitive suite on v1.35.4
	$(call with_k8s,1.35) CARGO="$(CARGO)" tests/e2e/run.sh versions

# The version-sensitive suite and the fidelity test on every minor of MINORS
# (third_party/control-plane/v1.N/), each built on first use (~10 min each); a failing one does not
# stop the others (logs in target/test-matrix/); then the table, printed and written into the
# book's "Supported versions", docs/src/versions.md (scripts/test-matrix.sh).
MINORS = 1.33 1.34 1.35 1.36 1.37
MATRIX_DIR = $(CURDIR)/target/test-matrix
test-matrix: ## the version-sensitive suite on every minor (MINORS=), table into the book
	MINORS="$(MINORS)" MATRIX_DIR="$(MATRIX_DIR)" CARGO="$(CARGO)" scripts/test-matrix.sh

# The brakes at the issue's full size: 200 Deferred resizes on 20 hollow nodes, 12 evictions a minute.
flood: ## the brakes under 200 Deferred resizes on 20 hollow nodes (~10 min)
	$(WITH_K8S) RESIZE_GUARD_FLOOD=full $(CARGO) test --workspace --locked \
		--test e2e -- preemption::failover::a_flood_of_deferred_resizes --nocapture

# Time-boxed proptest fuzzing on stable (fuzz/README.md): corpus replay, then mutation and
# generation until the budget is spent; a failure is shrunk and saved under target/fuzz-artifacts/.
FUZZ_SECONDS ?= 300
fuzz: ## the four fuzz targets, FUZZ_SECONDS each (default 300)
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test policy -- fuzz_quantity:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test policy -- fuzz_selector:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test policy -- fuzz_policy:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-webhook --test review -- fuzz_review:: --nocapture

# Kubernetes v1.37.2's own in-place resize e2e specs, unmodified, on the real node (as demo-node:
# needs root): once without resize-guard, once with it installed from its images (make push,
# kubectl apply -k deploy/) and metrics-server, then upstream's resize preemption spec with its
# alpha gate on and no resize-guard; each spec's outcome is compared with
# third_party/upstream-e2e/expected.tsv and any difference fails (MODE=without|with|gate for one
# mode, FOCUS=regex for some specs). Reports and logs under target/upstream-e2e/.
upstream-e2e: image ## upstream's resize e2e specs on the real node, without/with resize-guard (root)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(WITH_UPSTREAM_E2E) \
		$(TARGET_DIR)/debug/resize-guard-upstream-e2e $(if $(MODE),--mode $(MODE)) $(if $(FOCUS),--focus '$(FOCUS)')

##@ Lab: demos, measurements and a cluster to try by hand

# A real control plane, resize-guard installed from deploy/, and the three walls of the field test.
# The demos find the webhook and controller next to themselves in cargo's target directory (wherever
# CARGO_TARGET_DIR puts it); RESIZE_GUARD_BIN_DIR overrides.
demo: ## the field test's three walls, narrated, with resize-guard installed
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_METRICS_SERVER) $(TARGET_DIR)/debug/resize-guard-demo

# The three walls on a real node (kubelet, kube-proxy, containerd, runc; tests/node/), resize-guard
# installed from its images as the README says: make push to a local registry, kubectl apply -k.
demo-node: image ## the same walls on a real node, from the images as shipped (root)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(TARGET_DIR)/debug/resize-guard-demo-node

# The field report's VPA walls: VPA v1.6.0's updater and admission-controller, kube-scheduler and
# kube-controller-manager, without resize-guard and then with it; FULL=1 also waits out VPA's
# 5-minute Deferred fall-back without resize-guard. Then the whole loop with metrics-server and the
# real recommender: the memory wall and wall 3.
demo-vpa: ## the walls met by the real VPA updater, without and with resize-guard (FULL=1)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_VPA) $(WITH_METRICS_SERVER) $(TARGET_DIR)/debug/resize-guard-demo-vpa $(if $(FULL),--full,)

# Wall 3, VPA's lag from a usage change to the in-place resize, with VPA's own defaults (PRESET=shortest
# for the shortest intervals; REPLICAS=2, DROP=1 to measure a drop too; each step gives up after 12 min).
PRESET ?= defaults
REPLICAS ?= 2
vpa-lag: ## wall 3: VPA's lag from a usage change to the resize (PRESET=defaults|shortest)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_VPA) $(WITH_METRICS_SERVER) $(TARGET_DIR)/debug/resize-guard-vpa-lag \
		--preset $(PRESET) --replicas $(REPLICAS) $(if $(DROP),--drop,)

# A real control plane with hollow nodes (upstream kubelet) and metrics-server (Ctrl-C stops).
sandbox: ## a real control plane with hollow nodes to try resizes by hand (REAL_NODE=1)
	$(DEBUG_BINS)
	$(WITH_K8S) $(WITH_METRICS_SERVER) $(if $(REAL_NODE),$(WITH_NODE) $(WITH_REGISTRY)) \
		$(TARGET_DIR)/debug/resize-guard-sandbox tests/lab/sandbox.yaml $(if $(REAL_NODE),--real-node)

# VmRSS/VmHWM of the release binaries after both are ready on a real control plane holding PODS
# Deployment-shaped pods (~19 kB each as stored: managedFields, last-applied, env, probes).
PODS ?= 3000
rss: ## resident memory of the release webhook and controller on PODS=3000 pods
	$(CARGO) build --locked --release -p resize-guard-webhook -p resize-guard-controller
	$(DEBUG_BINS)
	$(WITH_K8S) $(TARGET_DIR)/debug/resize-guard-rss --webhook $(TARGET_DIR)/release/resize-guard-webhook \
		--controller $(TARGET_DIR)/release/resize-guard-controller --pods $(PODS) --settle 10

# Benchmarks, printed as tables and written under target/bench/, then into docs/src/benchmarks.md.
bench: ## benchmarks, tables under target/bench/ and in the book
	$(CARGO) bench --locked -p resize-guard-policy --bench decision
	$(CARGO) bench --locked -p resize-guard-policy --bench victims
	$(CARGO) bench --locked -p resize-guard-webhook --bench admission
	$(CARGO) bench --locked -p resize-guard-lab --bench scale
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench resize_latency
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench preemption_latency
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench preemption_victims
	$(MAKE) bench-report

# Every goal in target/bench/*.json beside its figure, written into docs/src/benchmarks.md's tables.
bench-report: ## target/bench/*.json into the book's benchmark tables
	$(DEBUG_BINS)
	$(TARGET_DIR)/debug/resize-guard-bench-report --readme docs/src/benchmarks.md

# Memory, start-up, review latency and Deferred planning of the release binaries as the cluster
# grows, on a real control plane (pods carry bench-written Running statuses on kubelet-less Node
# objects; the Deferred resize runs on a hollow node's real kubelet). target/bench/scale_apiserver.json
NODES ?= 1000
STEPS ?= 3000,10000,30000
bench-scale: ## both release programs on 1,000 nodes and 3,000 to 30,000 pods (~30 min)
	$(CARGO) build --locked --release -p resize-guard-webhook -p resize-guard-controller -p resize-guard-lab --bin resize-guard-webhook --bin resize-guard-controller --bin resize-guard-scale
	$(WITH_K8S) $(TARGET_DIR)/release/resize-guard-scale --webhook $(TARGET_DIR)/release/resize-guard-webhook \
		--controller $(TARGET_DIR)/release/resize-guard-controller --nodes $(NODES) --steps $(STEPS)

##@ Upstream parts: built from third_party/ on first use, then reused

# .ci/run builds them beside the Rust builds.
PARTS ?= $(UPSTREAM_PARTS)
upstream: ## build (or reuse) every upstream part make test uses (PARTS= some of them)
	set -e; for p in $(PARTS); do third_party/$$p/build.sh >/dev/null; done

control-plane: ## build (or reuse) the control plane of RESIZE_GUARD_K8S_VERSION (default 1.37)
	third_party/control-plane/build.sh >/dev/null

vpa: ## build (or reuse) VPA v1.6.0's recommender, updater and admission-controller
	third_party/vpa/build.sh >/dev/null
