# resize-guard — every command a person or CI needs.
#   make test     fmt check, clippy (-D warnings), dependency guard, unit + end-to-end tests
#                 against a real kube-apiserver v1.37.2 + etcd (built from Go modules on first use),
#                 then the short subset of Kubernetes' own resize e2e specs on the real node
#                 (make upstream-e2e-short)
#   make test-versions  the version-sensitive suite on v1.35.4 (its binaries built on first use)
#   make test-matrix  the version-sensitive suite on v1.33, v1.34, v1.35, v1.36 and v1.37 (each minor's
#                 binaries built on first use, ~10 min each); prints the table and writes it into the README
#   make image    static (musl), stripped release binaries for PLATFORMS (default linux/amd64 linux/arm64;
#                 PLATFORMS=linux/amd64 for one), cross-compiled without root by zig (cargo-zigbuild) under
#                 cargo-auditable (third_party/cross/build.sh installs both and zig from PyPI and crates.io), and their
#                 images from deploy/image/Containerfile, without a container engine:
#                 target/image/resize-guard-{webhook,controller}-<version>.oci.tar (OCI image index, one manifest
#                 per platform, tagged <version>-g<commit>; RELEASE=1: <version>), each image's CycloneDX SBOM
#                 resize-guard-{webhook,controller}-<version>.cdx.json (from the binaries' embedded dependency
#                 trees), the kubectl plugin as kubectl-resize_guard-<version>-linux-<arch>.tar.gz (+ .sha256) and
#                 the krew manifest target/image/resize-guard.yaml listing those archives
#   make plugins  make image, plus the kubectl plugin for darwin/amd64, darwin/arm64 (.tar.gz) and windows/amd64
#                 (.zip), and the krew manifest listing every archive (~5 min a platform; not in make test)
#   make krew     validate target/image/resize-guard.yaml with krew's own validate-krew-manifest
#   make upstream build (or reuse) every upstream part the tests use: the cross toolchain (zig, cargo-zigbuild,
#                 cargo-auditable), qemu-aarch64, control planes, upstream's
#                 resize e2e specs, helm, VPA, the registry, cosign, promtool, metrics-server, krew's validator,
#                 the real node's kubelet,
#                 kube-proxy, containerd and runc
#   make push     push both images to REGISTRY=host[:port]/namespace (TAG=..., PLAIN_HTTP=1 for a registry
#                 on loopback) with the OCI distribution API, each with its CycloneDX SBOM as an OCI
#                 artifact referring to it; credentials from docker/podman login (files, credential
#                 helpers, identity tokens); prints the kustomize images: block and Helm --set flags
#                 that pin what it pushed
#   make sign     sign what make push pushed with cosign: REGISTRY=... KEY=cosign.key|kms-uri (TLOG=0: no
#                 transparency log); docs/signing.md: verifying, and admission policies that check it
#   make bench    benchmarks, printed as tables and written under target/bench/
#   make sandbox  a real control plane with hollow nodes (upstream kubelet) and metrics-server to try resizes
#                 by hand (Ctrl-C stops; REAL_NODE=1 adds a real node)
#   make demo     the field test's three walls, narrated, with resize-guard installed; exits non-zero on any miss
#   make demo-node the same walls on a real node (kubelet + containerd + runc), resize-guard running
#                 from its images as shipped; needs root (network namespace, cgroups)
#   make demo-vpa the same walls met by the real VPA v1.6.0 updater, without and with resize-guard, then the
#                 whole loop with metrics-server and the real recommender (~3.5 min; FULL=1: +5 min)
#   make vpa-lag  wall 3: VPA's lag from a usage change to the in-place resize (PRESET=defaults ~9 min, shortest ~2 min)
#   make rss      resident memory of the release webhook and controller on 3,000 realistic pods (PODS=N)
#   make bench-scale  both release programs on a real kube-apiserver holding 1,000 nodes and
#                 3,000 -> 10,000 -> 30,000 running pods (STEPS=..., NODES=...; ~30 min)
#   make vpa      build (or reuse) VPA v1.6.0's recommender, updater and admission-controller for the VPA tests
#   make flood    the brakes under 200 Deferred resizes on 20 hollow nodes (~10 min; `make test` runs 20 on 4)
#   make fuzz     the four fuzz targets for FUZZ_SECONDS each (default 300; `make test` runs them 10 s each)
#   make upstream-e2e  Kubernetes v1.37.2's own resize e2e specs on the real node, without and with
#                 resize-guard, and upstream's preemption spec with its alpha gate (~40 min, root)

CARGO ?= cargo
comma := ,
# Cargo's target directory as cargo resolves it (CARGO_TARGET_DIR, .cargo/config.toml or ./target),
# for the recipes that run built binaries by path; evaluated only where used.
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps --locked \
	| python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
# Builds (first run, ~10 min) or reuses the upstream binaries of the minor RESIZE_GUARD_K8S_VERSION
# names (default 1.37); its last output line is their directory.
WITH_K8S = RESIZE_GUARD_K8S_BIN_DIR="$$(third_party/control-plane/build.sh | tail -n 1)"
# The same for one given minor: $(call with_k8s,1.35).
with_k8s = RESIZE_GUARD_K8S_VERSION=$(1) RESIZE_GUARD_K8S_BIN_DIR="$$(RESIZE_GUARD_K8S_VERSION=$(1) third_party/control-plane/build.sh | tail -n 1)"
# The minors of the version matrix (third_party/control-plane/v1.N/), and where its results go.
MINORS = 1.33 1.34 1.35 1.36 1.37
MATRIX_DIR = $(CURDIR)/target/test-matrix
# helm v3 from Go modules (first run a few minutes), for the chart's lint/template/dry-run tests.
WITH_HELM = RESIZE_GUARD_HELM_BIN="$$(third_party/helm/build.sh | tail -n 1)/helm"
# VPA v1.6.0 recommender + updater + admission-controller from Go modules (first run 4-8 min), for the VPA tests.
WITH_VPA = RESIZE_GUARD_VPA_DIR="$$(third_party/vpa/build.sh | tail -n 1)"
# CNCF distribution's registry from Go modules (first run a few minutes), for the push test and
# the real node.
WITH_REGISTRY = RESIZE_GUARD_REGISTRY_BIN="$$(third_party/registry/build.sh | tail -n 1)/registry"
# sigstore's cosign v3 from its Go module (first run several minutes), for the signing test
# (image/tests/images/sign.rs) and `make sign`.
WITH_COSIGN = RESIZE_GUARD_COSIGN_BIN="$$(third_party/cosign/build.sh | tail -n 1)/cosign"
# A real node's parts: kubelet and kube-proxy v1.37.2, containerd, runc, the CNI plugins and a
# pause (first run ~6 min), for the real-node suite (tests/node/).
WITH_NODE = RESIZE_GUARD_NODE_BIN_DIR="$$(third_party/node/build.sh | tail -n 1)"
WITH_PROMTOOL = RESIZE_GUARD_PROMTOOL_BIN="$$(third_party/promtool/build.sh | tail -n 1)/promtool"
# metrics-server v0.8.0 from Go modules (first run a few minutes), for the metrics API tests.
WITH_METRICS_SERVER = RESIZE_GUARD_METRICS_SERVER_BIN="$$(third_party/metrics-server/build.sh | tail -n 1)/metrics-server"
# Kubernetes v1.37.2's own in-place resize e2e specs as one test binary (go test -c; first run
# ~4 min) beside the BusyBox image they run (Debian's busybox-static), for make upstream-e2e.
WITH_UPSTREAM_E2E = RESIZE_GUARD_UPSTREAM_E2E_BIN="$$(third_party/upstream-e2e/build.sh | tail -n 1)/resize-e2e.test"

.PHONY: e2e vpa-lag demo-node upstream-e2e upstream-e2e-short upstream push sign krew plugins test test-versions test-matrix fmt-check clippy deps-check control-plane vpa image unit bench bench-report bench-scale sandbox demo demo-vpa fmt fuzz rss flood

# A real control plane, resize-guard installed from deploy/, and the three walls of the field test.
# The demos find the webhook and controller next to themselves in cargo's target directory (wherever
# CARGO_TARGET_DIR puts it); RESIZE_GUARD_BIN_DIR overrides.
demo:
	$(CARGO) build --locked -p resize-guard-webhook -p resize-guard-controller -p resize-guard-kubectl -p resize-guard-lab --bins
	$(WITH_K8S) $(WITH_METRICS_SERVER) $(CARGO) run --locked -q -p resize-guard-lab --bin resize-guard-demo

# The three walls on a real node (kubelet, kube-proxy, containerd, runc; tests/node/), resize-guard
# installed from its images as the README says: make push to a local registry, kubectl apply -k.
demo-node: image
	$(CARGO) build --locked -p resize-guard-kubectl -p resize-guard-lab --bins
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(CARGO) run --locked -q -p resize-guard-lab --bin resize-guard-demo-node

# Kubernetes v1.37.2's own in-place resize e2e specs, unmodified, on the real node (as demo-node:
# needs root): once without resize-guard, once with it installed from its images (make push,
# kubectl apply -k deploy/) and metrics-server, then upstream's resize preemption spec with its
# alpha gate on and no resize-guard; each spec's outcome is compared with
# third_party/upstream-e2e/expected.tsv and any difference fails (MODE=without|with|gate for one mode,
# FOCUS=regex for some specs). Reports and logs under target/upstream-e2e/.
upstream-e2e: image
	$(CARGO) build --locked -p resize-guard-lab --bin resize-guard-upstream-e2e
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(WITH_UPSTREAM_E2E) $(CARGO) run --locked -q -p resize-guard-lab \
		--bin resize-guard-upstream-e2e -- $(if $(MODE),--mode $(MODE)) $(if $(FOCUS),--focus '$(FOCUS)')

# Its short subset (tests/lab/src/bin/upstream_e2e.rs SHORT: a spec or two of every group, and
# upstream's resize preemption spec with its gate off), with resize-guard installed only; part of
# make test (about 3 minutes).
upstream-e2e-short: image
	$(CARGO) build --locked -p resize-guard-lab --bin resize-guard-upstream-e2e
	$(WITH_K8S) $(WITH_NODE) $(WITH_REGISTRY) $(WITH_METRICS_SERVER) $(WITH_UPSTREAM_E2E) $(CARGO) run --locked -q -p resize-guard-lab \
		--bin resize-guard-upstream-e2e -- --mode with --short

# The field report's VPA walls: VPA v1.6.0's updater and admission-controller, kube-scheduler and
# kube-controller-manager, without resize-guard and then with it; FULL=1 also waits out VPA's
# 5-minute Deferred fall-back without resize-guard. Then the whole loop with metrics-server and the
# real recommender: the memory wall and wall 3.
demo-vpa:
	$(CARGO) build --locked -p resize-guard-webhook -p resize-guard-controller -p resize-guard-lab --bins
	$(WITH_K8S) $(WITH_VPA) $(WITH_METRICS_SERVER) $(CARGO) run --locked -q -p resize-guard-lab \
		--bin resize-guard-demo-vpa -- $(if $(FULL),--full,)

# Wall 3, VPA's lag from a usage change to the in-place resize, with VPA's own defaults (PRESET=shortest
# for the shortest intervals; REPLICAS=2, DROP=1 to measure a drop too; each step gives up after 12 min).
PRESET ?= defaults
REPLICAS ?= 2
vpa-lag:
	$(WITH_K8S) $(WITH_VPA) $(WITH_METRICS_SERVER) $(CARGO) run --locked -q -p resize-guard-lab \
		--bin resize-guard-vpa-lag -- --preset $(PRESET) --replicas $(REPLICAS) $(if $(DROP),--drop,)

# `make test` builds the images and one plugin platform besides Linux (macOS on Apple silicon: its
# Mach-O checked by the image tests as `make plugins` would; ~4 min cold on 2 cores), not all three.
test: PLUGIN_PLATFORMS = darwin/arm64
test: fmt-check clippy deps-check plugins unit e2e upstream-e2e-short

# Static, stripped release binaries for each of PLATFORMS (Linux: musl, so static; one variable
# away from an amd64-only build: `make image PLATFORMS=linux/amd64`) in their own target dir so
# the debug cache stays warm, then one OCI archive per image (an image index over the platforms'
# manifests), stamped with the commit and its time (same binaries, same digest), and its SBOM; the
# controller image also carries resize-guard-certs (deploy/image/Containerfile says why). No root
# and no system package: every target is cross-compiled with zig as C compiler and linker through
# cargo-zigbuild, under cargo-auditable so each binary embeds its dependency tree, the three
# installed (pinned, cached) by third_party/cross/build.sh from PyPI and crates.io; rustup adds the
# Rust targets. The image writer, the plugin packer and the pusher (image/) are built with the
# platform of this machine (optimised: gzip is ~5x slower in a debug build). What runs where is
# checked by the image tests (image/tests/images/), not here: a binary for another CPU or a
# dynamically linked one is refused by the image writer (image/src/executable.rs).
PLATFORMS ?= linux/amd64 linux/arm64
# `make plugins` adds these kubectl plugin builds (zig links macOS and Windows too).
PLUGIN_PLATFORMS ?= darwin/amd64 darwin/arm64 windows/amd64
triple.linux/amd64 = x86_64-unknown-linux-musl
triple.linux/arm64 = aarch64-unknown-linux-musl
triple.darwin/amd64 = x86_64-apple-darwin
triple.darwin/arm64 = aarch64-apple-darwin
triple.windows/amd64 = x86_64-pc-windows-gnu
triple = $(or $(triple.$(1)),$(error unknown platform $(1) (known: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)))
IMAGE_BUILD = target/image-build
bin_dir = $(IMAGE_BUILD)/$(call triple,$(1))/release
# The image tools run here: on Linux built static like the images (so they share one build),
# elsewhere (a macOS builder) for the host.
HOST_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
tool_target.x86_64-unknown-linux-gnu = x86_64-unknown-linux-musl
tool_target.aarch64-unknown-linux-gnu = aarch64-unknown-linux-musl
TOOL_TARGET = $(or $(tool_target.$(HOST_TRIPLE)),$(HOST_TRIPLE))
IMAGE_BIN = $(IMAGE_BUILD)/$(TOOL_TARGET)/release
# Paths in panic messages name the checkout and cargo's registry relatively, so two machines
# building one commit write the same bytes.
IMAGE_RUSTFLAGS = -C strip=symbols --remap-path-prefix=$(CURDIR)=. --remap-path-prefix=$${CARGO_HOME:-$$HOME/.cargo}=cargo
IMAGE_PACKAGES = -p resize-guard-webhook -p resize-guard-controller -p resize-guard-certs -p resize-guard-kubectl
TOOL_PACKAGES = -p resize-guard-image
# `cargo auditable zigbuild`: cargo-auditable runs $CARGO (here cargo-zigbuild) with itself as
# rustc's workspace wrapper; cargo-zigbuild runs cargo with zig as each target's linker and C
# compiler. Expects cross= to hold third_party/cross/build.sh's directory.
ZIGBUILD = RUSTFLAGS="$(IMAGE_RUSTFLAGS)" CARGO_TARGET_DIR=$(IMAGE_BUILD) CARGO_ZIGBUILD_ZIG_PATH="$$cross/zig" \
	CARGO="$$cross/cargo-zigbuild" "$$cross/cargo-auditable" auditable zigbuild --locked --release
# macOS: the oldest release the plugin runs on, and the framework stubs it links against.
DARWIN_ENV = MACOSX_DEPLOYMENT_TARGET=11.0 SDKROOT="$$cross/macos-sdk"
rustup_targets = installed="$$(rustup target list --installed)"; for t in $(1); do \
	printf '%s\n' "$$installed" | grep -qx "$$t" || rustup target add "$$t" || exit 1; done
# The kubectl plugin ships as krew archives next to the images (the plugin and LICENSE, the
# commit's time on every entry, so the same source gives the same bytes; .tar.gz, .zip for
# Windows), each with its sha256, and target/image/resize-guard.yaml: the krew manifest
# plugins/resize-guard.yaml listing exactly the archives built (`make krew` validates it).
VERSION = $(shell $(CARGO) metadata --format-version 1 --no-deps --locked \
	| python3 -c 'import json, sys; print([p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "resize-guard-kubectl"][0])')
KREW_MANIFEST = target/image/resize-guard.yaml
COMMIT_TIME = $$(git log -1 --format=%ct 2>/dev/null || echo 0)
# Every build gets its own tag, so a node never keeps a stale image under IfNotPresent: the version,
# the commit, and -dirty for uncommitted changes (0.2.0-g1a2b3c4); RELEASE=1 tags the version alone.
IMAGE_TAG = $(if $(RELEASE),$(VERSION),$(VERSION)-g$(shell git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty))
PLUGIN_PACK = SOURCE_DATE_EPOCH="$(COMMIT_TIME)" $(IMAGE_BIN)/resize-guard-plugin --out-dir target/image
image:
	@$(call rustup_targets,$(sort $(foreach p,$(PLATFORMS),$(call triple,$p)) $(TOOL_TARGET)))
	cross="$$(third_party/cross/build.sh | tail -n 1)" && \
	$(foreach p,$(PLATFORMS),$(ZIGBUILD) --target $(call triple,$p) $(IMAGE_PACKAGES) \
		$(if $(filter $(TOOL_TARGET),$(call triple,$p)),$(TOOL_PACKAGES)) && ) \
	$(if $(filter $(TOOL_TARGET),$(foreach p,$(PLATFORMS),$(call triple,$p))),true,\
		$(if $(findstring musl,$(TOOL_TARGET)),$(ZIGBUILD),CARGO_TARGET_DIR=$(IMAGE_BUILD) $(CARGO) build --locked --release) \
		--target $(TOOL_TARGET) $(TOOL_PACKAGES))
	SOURCE_DATE_EPOCH="$(COMMIT_TIME)" $(IMAGE_BIN)/resize-guard-image \
		--revision "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" --out-dir target/image --tag "$(IMAGE_TAG)" \
		$(foreach p,$(PLATFORMS),--platform $p=$(call bin_dir,$p)) resize-guard-webhook resize-guard-controller
	$(PLUGIN_PACK) $(foreach p,$(PLATFORMS),--platform $p=$(call bin_dir,$p))
	@echo "image: both images are tagged $(IMAGE_TAG) ($(PLATFORMS)); make push REGISTRY=<yours> prints the kustomize and Helm lines that run them"

# The kubectl plugin for PLUGIN_PLATFORMS too (macOS on Intel and Apple silicon, Windows), each
# a release build of kubectl/ alone with zig (~5 min each on 2 cores, so not part of make test),
# then every archive and the manifest again, now listing PLATFORMS and PLUGIN_PLATFORMS.
plugins: image
	@$(call rustup_targets,$(foreach p,$(PLUGIN_PLATFORMS),$(call triple,$p)))
	cross="$$(third_party/cross/build.sh | tail -n 1)" && $(DARWIN_ENV) $(ZIGBUILD) \
		$(foreach p,$(PLUGIN_PLATFORMS),--target $(call triple,$p)) -p resize-guard-kubectl
	$(PLUGIN_PACK) $(foreach p,$(PLATFORMS) $(PLUGIN_PLATFORMS),--platform $p=$(call bin_dir,$p))

# The krew manifest `make image` or `make plugins` wrote, checked by krew's own
# validate-krew-manifest (built from sigs.k8s.io/krew's Go module by third_party/krew/build.sh;
# structure, platforms, no overlaps; the install half needs the archives at their release URLs,
# so it is skipped here; image/tests/images/krew.rs installs them from a local server).
krew:
	@test -f $(KREW_MANIFEST) || { echo "make krew: no $(KREW_MANIFEST): run make image (or make plugins) first" >&2; exit 2; }
	"$$(third_party/krew/build.sh | tail -n 1)/validate-krew-manifest" -manifest $(KREW_MANIFEST) -skip-install

# The images `make image` wrote, pushed under REGISTRY by the release build of resize-guard-push
# (image/src/push.rs; image/tests/images/push.rs runs this target against a real registry), each
# with its CycloneDX SBOM beside it as an OCI artifact referring to the image (NO_SBOM=1 leaves
# the SBOMs out). Credentials: docker's and podman's files and credential helpers.
push:
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host[:port]/namespace [TAG=tag] [PLAIN_HTTP=1] [NO_SBOM=1]" >&2; exit 2; }
	@test -x $(IMAGE_BIN)/resize-guard-push || { echo "make push: run make image first" >&2; exit 2; }
	$(IMAGE_BIN)/resize-guard-push --registry "$(REGISTRY)" $(if $(TAG),--tag "$(TAG)") $(if $(PLAIN_HTTP),--plain-http) \
		$(if $(NO_SBOM),--no-sbom) target/image/resize-guard-webhook-$(VERSION).oci target/image/resize-guard-controller-$(VERSION).oci

# Signs what `make push` pushed: each image index by the digest `make image` wrote (the one the
# tag names after the push), with cosign (COSIGN=path, else v3 built by third_party/cosign/build.sh)
# and KEY (a cosign key file with COSIGN_PASSWORD in the environment, or a KMS URI). The signature
# goes beside the image as a Sigstore bundle referring to it; SIGNATURE_FORMAT=legacy writes
# cosign's older `sha256-<hex>.sig` tag instead, for verifiers that read only that. TLOG=0 keeps it
# out of the Rekor transparency log (a registry on loopback, an air-gapped site). docs/signing.md
# says how to verify it and how an admission policy checks it.
COSIGN ?= "$$(third_party/cosign/build.sh | tail -n 1)/cosign"
SIGNATURE_FORMAT ?= bundle
sign:
	@test -n "$(REGISTRY)" -a -n "$(KEY)" || { echo "usage: make sign REGISTRY=host[:port]/namespace KEY=cosign.key|kms-uri [TLOG=0] [SIGNATURE_FORMAT=bundle|legacy] [PLAIN_HTTP=1] [COSIGN=path]" >&2; exit 2; }
	@case "$(SIGNATURE_FORMAT)" in bundle|legacy) ;; *) echo "make sign: SIGNATURE_FORMAT is bundle or legacy" >&2; exit 2;; esac
	@cosign=$(COSIGN); for b in webhook controller; do \
		layout=target/image/resize-guard-$$b-$(VERSION).oci; \
		test -f $$layout/index.json || { echo "make sign: $$layout is missing: run make image and make push first" >&2; exit 2; }; \
		digest=$$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' $$layout/index.json) || exit 1; \
		echo "make sign: $(REGISTRY)/resize-guard-$$b@$$digest"; \
		"$$cosign" sign --yes --key "$(KEY)" \
			$(if $(or $(filter 0,$(TLOG)),$(filter legacy,$(SIGNATURE_FORMAT))),--use-signing-config=false) \
			$(if $(filter 0,$(TLOG)),--tlog-upload=false) $(if $(filter legacy,$(SIGNATURE_FORMAT)),--new-bundle-format=false) \
			$(if $(PLAIN_HTTP),--allow-http-registry) "$(REGISTRY)/resize-guard-$$b@$$digest" || exit 1; \
	done

control-plane:
	third_party/control-plane/build.sh >/dev/null

# The Vertical Pod Autoscaler v1.6.0 recommender, updater and admission-controller (third_party/vpa), built or reused.
vpa:
	third_party/vpa/build.sh >/dev/null

fmt-check:
	$(CARGO) fmt --all -- --check

# `--all-targets` leaves out the e2e binary (`test = false`), so it is named.
clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) clippy --workspace --test e2e --locked -- -D warnings

# The policy crate must stay pure: no kube client, no async runtime, no HTTP stack.
deps-check:
	@bad=$$($(CARGO) tree -p resize-guard-policy -e normal --prefix none --locked \
		| grep -E '^(kube|kube-[a-z]+|tokio|hyper|hyper-[a-z]+|reqwest|axum|tower) ' || true); \
	if [ -n "$$bad" ]; then \
		echo "resize-guard-policy must not depend on:"; echo "$$bad"; exit 1; \
	else echo "deps-check: resize-guard-policy has no kube/tokio/hyper dependency"; fi

# The fast tier: every crate's unit and in-process tests, no API server (tests/e2e's binary is
# `test = false`: it runs only when named) (the image tests push to a
# local registry and run krew as `kubectl krew`).
unit:
	$(call with_k8s,1.37) $(WITH_REGISTRY) $(WITH_COSIGN) $(CARGO) test --workspace --locked

# The end-to-end suites (tests/e2e), one process per suite, E2E_JOBS of them at a time (longest
# first; most of a suite's time is spent waiting on its cluster); SUITES=admission,vpa::updater
# picks some (a substring of the module path), ARGS="--nocapture" goes to the test binary.
SUITES ?=
E2E_JOBS ?= 3
e2e:
	$(call with_k8s,1.37) $(WITH_HELM) $(WITH_VPA) $(WITH_REGISTRY) $(WITH_NODE) $(WITH_PROMTOOL) $(WITH_METRICS_SERVER) \
		CARGO="$(CARGO)" JOBS=$(E2E_JOBS) tests/e2e/run.sh $(subst $(comma), ,$(SUITES)) $(if $(ARGS),-- $(ARGS))

# Every upstream part `make test` uses, built or reused (.ci/run builds them beside the Rust builds);
# the release build's cross toolchain and the tests' qemu first, so `make image` finds them ready.
upstream:
	third_party/cross/build.sh >/dev/null
	third_party/qemu/build.sh >/dev/null
	third_party/control-plane/build.sh >/dev/null
	third_party/upstream-e2e/build.sh >/dev/null
	third_party/helm/build.sh >/dev/null
	third_party/vpa/build.sh >/dev/null
	third_party/registry/build.sh >/dev/null
	third_party/cosign/build.sh >/dev/null
	third_party/promtool/build.sh >/dev/null
	third_party/metrics-server/build.sh >/dev/null
	third_party/node/build.sh >/dev/null
	third_party/krew/build.sh >/dev/null

# The version-sensitive suite on v1.35, the first minor where in-place resize is GA (`make test` runs
# it on v1.37 with everything else; `make test-matrix` on every minor). Its control plane is built
# on first use (~7 min cold): a cold CI run on 2 cores cannot also afford it inside 60 minutes.
test-versions:
	$(call with_k8s,1.35) CARGO="$(CARGO)" tests/e2e/run.sh versions

# Every minor in turn (a failing one does not stop the others; logs in target/test-matrix/), then
# the table, printed and written into the README's "Supported versions".
test-matrix:
	rm -rf $(MATRIX_DIR) && mkdir -p $(MATRIX_DIR)
	$(CARGO) build --locked -p resize-guard-lab --bin resize-guard-matrix
	$(CARGO) test --workspace --locked --no-run
	@status=0; for m in $(MINORS); do \
		start=$$(date +%s); \
		echo "test-matrix: Kubernetes $$m …"; \
		if $(call with_k8s,$$m) RESIZE_GUARD_MATRIX_DIR=$(MATRIX_DIR) \
			$(CARGO) test --workspace --locked --test e2e -- versions:: --nocapture \
			>$(MATRIX_DIR)/v$$m.log 2>&1; then \
			echo "test-matrix: Kubernetes $$m: version-sensitive suite passed in $$(( $$(date +%s) - start ))s"; \
		else status=1; echo "test-matrix: Kubernetes $$m: version-sensitive suite FAILED after $$(( $$(date +%s) - start ))s:"; \
			tail -n 40 $(MATRIX_DIR)/v$$m.log; fi; \
		start=$$(date +%s); \
		if $(call with_k8s,$$m) RESIZE_GUARD_MATRIX_DIR=$(MATRIX_DIR) \
			$(CARGO) test --workspace --locked --test e2e -- --nocapture \
			admission::fidelity::resize_guard_never_contradicts_the_api_server_on_generated_resizes >$(MATRIX_DIR)/v$$m.fidelity.log 2>&1; then \
			echo "test-matrix: Kubernetes $$m: fidelity passed in $$(( $$(date +%s) - start ))s"; \
		else status=1; echo "test-matrix: Kubernetes $$m: fidelity FAILED after $$(( $$(date +%s) - start ))s:"; \
			tail -n 40 $(MATRIX_DIR)/v$$m.fidelity.log; fi; \
	done; \
	$(TARGET_DIR)/debug/resize-guard-matrix --dir $(MATRIX_DIR) --minors "$(MINORS)" --readme README.md || status=1; \
	exit $$status

# The brakes at the issue's full size: 200 Deferred resizes on 20 hollow nodes, 12 evictions a minute.
flood:
	$(WITH_K8S) RESIZE_GUARD_FLOOD=full $(CARGO) test --workspace --locked \
		--test e2e -- preemption::failover::a_flood_of_deferred_resizes --nocapture

sandbox:
	$(WITH_K8S) $(WITH_METRICS_SERVER) $(if $(REAL_NODE),$(WITH_NODE) $(WITH_REGISTRY)) $(CARGO) run --locked -p resize-guard-lab \
		--bin resize-guard-sandbox -- tests/lab/sandbox.yaml $(if $(REAL_NODE),--real-node)

bench:
	$(CARGO) bench --locked -p resize-guard-policy --bench decision
	$(CARGO) bench --locked -p resize-guard-policy --bench victims
	$(CARGO) bench --locked -p resize-guard-webhook --bench admission
	$(CARGO) bench --locked -p resize-guard-lab --bench scale
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench resize_latency
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench preemption_latency
	$(WITH_K8S) $(CARGO) bench --locked -p resize-guard-lab --bench preemption_victims
	$(MAKE) bench-report

# Every goal in target/bench/*.json beside its figure, written into the README's goals table.
bench-report:
	$(CARGO) run --locked -q -p resize-guard-lab --bin resize-guard-bench-report -- --readme README.md

fmt:
	$(CARGO) fmt --all

# VmRSS/VmHWM of the release binaries after both are ready on a real control plane holding PODS
# Deployment-shaped pods (~19 kB each as stored: managedFields, last-applied, env, probes).
PODS ?= 3000
rss:
	$(CARGO) build --locked --release -p resize-guard-webhook -p resize-guard-controller
	$(CARGO) build --locked -p resize-guard-lab --bin resize-guard-rss
	$(WITH_K8S) $(TARGET_DIR)/debug/resize-guard-rss --webhook $(TARGET_DIR)/release/resize-guard-webhook \
		--controller $(TARGET_DIR)/release/resize-guard-controller --pods $(PODS) --settle 10

# Memory, start-up, review latency and Deferred planning of the release binaries as the cluster
# grows, on a real control plane (pods carry bench-written Running statuses on kubelet-less Node
# objects; the Deferred resize runs on a hollow node's real kubelet). target/bench/scale_apiserver.json
NODES ?= 1000
STEPS ?= 3000,10000,30000
bench-scale:
	$(CARGO) build --locked --release -p resize-guard-webhook -p resize-guard-controller -p resize-guard-lab --bin resize-guard-webhook --bin resize-guard-controller --bin resize-guard-scale
	$(WITH_K8S) $(TARGET_DIR)/release/resize-guard-scale --webhook $(TARGET_DIR)/release/resize-guard-webhook \
		--controller $(TARGET_DIR)/release/resize-guard-controller --nodes $(NODES) --steps $(STEPS)

# Time-boxed proptest fuzzing on stable (fuzz/README.md): corpus replay, then mutation and
# generation until the budget is spent; a failure is shrunk and saved under target/fuzz-artifacts/.
FUZZ_SECONDS ?= 300
fuzz:
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test generated -- fuzz_quantity:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test generated -- fuzz_selector:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-policy --test generated -- fuzz_policy:: --nocapture
	RESIZE_GUARD_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test --locked -p resize-guard-webhook --test review -- fuzz_review:: --nocapture
