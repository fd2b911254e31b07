# resize-guard — every command a person or CI needs.
#   make test   fmt check, clippy (-D warnings), dependency guard, all tests
#   make bench  benchmarks, printed as tables and written under target/bench/

CARGO ?= cargo

.PHONY: test fmt-check clippy deps-check unit bench fmt

test: fmt-check clippy deps-check unit

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# The policy crate must stay pure: no kube client, no async runtime, no HTTP stack.
deps-check:
	@bad=$$($(CARGO) tree -p resize-guard-policy -e normal --prefix none --locked \
		| grep -E '^(kube|kube-[a-z]+|tokio|hyper|hyper-[a-z]+|reqwest|axum|tower) ' || true); \
	if [ -n "$$bad" ]; then \
		echo "resize-guard-policy must not depend on:"; echo "$$bad"; exit 1; \
	else echo "deps-check: resize-guard-policy has no kube/tokio/hyper dependency"; fi

unit:
	$(CARGO) test --workspace --locked

bench:
	$(CARGO) bench --locked -p resize-guard-policy --bench decision

fmt:
	$(CARGO) fmt --all
