# Pagar — every target installs what it needs when it is missing (Debian 12, as root or with sudo).

SHELL := /bin/bash
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SANDBOX_DIR ?= target/sandbox
API_LISTEN ?= 127.0.0.1:8080
API_KEY ?= sk_test_sandbox_local
ADMIN_TOKEN ?= qa-admin-local

.PHONY: run api test lint unit bench deps-bench fmt clean-sandbox

## run: start Pagar on its embedded default. Until the desktop app lands (issue 4) this is the
## sandbox payment API, the part that exists today.
run: api

## api: the payment API on $(API_LISTEN) with a sandbox database, key and admin token.
api:
	@mkdir -p $(SANDBOX_DIR)
	$(CARGO) run --release -p payment-api -- \
		--listen $(API_LISTEN) \
		--database $(SANDBOX_DIR)/pagar-api.db \
		--api-key $(API_KEY)=loja_sandbox \
		--admin-token $(ADMIN_TOKEN)

## test: formatting, clippy, and every test of the workspace.
test: lint unit

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace

## bench: throughput and latency against SQLite's raw durable commit rate (needs wrk).
bench: deps-bench
	$(CARGO) bench -p payment-api --bench api
	$(CARGO) bench -p checkout-core --bench outbox

deps-bench:
	@command -v wrk >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y wrk; }

fmt:
	$(CARGO) fmt --all

clean-sandbox:
	rm -rf $(SANDBOX_DIR)
