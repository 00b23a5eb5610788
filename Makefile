# Pagar — every target installs what it needs when it is missing (Debian 12, as root or with sudo).

# tauri-driver lands in ~/.cargo/bin; the GUI tests find it on PATH.
export PATH := $(HOME)/.cargo/bin:$(PATH)

SHELL := /bin/bash
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SANDBOX_DIR ?= target/sandbox
API_LISTEN ?= 127.0.0.1:8080
API_KEY ?= sk_test_sandbox_local
ADMIN_TOKEN ?= qa-admin-local
PIX_LISTEN ?= 127.0.0.1:8090
MAQUININHA_LISTEN ?= 127.0.0.1:8091
ADQUIRENTE_LISTEN ?= 127.0.0.1:8092
# Sandbox secrets only (Standard Webhooks' own example secret; a machine secret for the sandbox).
SANDBOX_WEBHOOK_SECRET ?= whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
SANDBOX_MACHINE_SECRET ?= maquininha_sandbox_secret
PG_ADMIN_URL ?= postgres://postgres@127.0.0.1:5432/postgres
PG_DATABASE ?= pagar
PG_URL ?= postgres://postgres@127.0.0.1:5432/$(PG_DATABASE)

GUI_PACKAGES := libwebkit2gtk-4.1-dev libayatana-appindicator3-dev librsvg2-dev libsoup-3.0-dev \
	libxdo-dev libssl-dev libdbus-1-dev pkg-config xvfb xauth webkit2gtk-driver dbus imagemagick \
	gnome-keyring zbar-tools

.PHONY: run api maquininha adquirente sefaz nfce-sample deps-nfce deps-browser replicas test lint unit properties mutation-check ui-test bench trials package package-test deps-bench deps-gui deps-pg deps-fuse deps-trials deps-openapi deps-node deps-package fmt clean-sandbox

TRIALS ?= 10000
SEED ?= 1
STORE ?= mixed
JOBS ?= 12

## run: open the cashier app on its embedded default (in-process payment API, sandbox database).
run: deps-gui deps-nfce
	@[ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] || echo "make run: no display found; on a headless machine use: xvfb-run make run"
	$(CARGO) run -p pagar

## deps-gui: the system packages Tauri and the GUI tests need, and tauri-driver.
deps-gui:
	@missing=""; for p in $(GUI_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; $(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; fi
	@command -v tauri-driver >/dev/null || $(CARGO) install tauri-driver --locked --version '^2'

## api: the payment API on $(API_LISTEN) with a sandbox key and admin token, on a sandbox SQLite
## database (or on PostgreSQL when DATABASE_URL is set), with its providers' simulators each as a
## process of its own with its own data in $(SANDBOX_DIR): the Pix provider on $(PIX_LISTEN) (mutual
## TLS and OAuth2, as PSPs ask; its certificates in $(SANDBOX_DIR)/pix-tls) and
## the card machine on $(MAQUININHA_LISTEN) (its page: /terminais/PAGAR_SIM__POS-1), and the card
## acquirer (card not present) on $(ADQUIRENTE_LISTEN). Ctrl-C stops all.
api:
	@mkdir -p $(SANDBOX_DIR)
	$(CARGO) build --release -p payment-api -p pix-provider -p maquininha -p adquirente
	@trap 'kill 0' INT TERM EXIT; \
	target/release/adquirente --listen $(ADQUIRENTE_LISTEN) --database $(SANDBOX_DIR)/adquirente.db & \
	target/release/pix-provider --listen $(PIX_LISTEN) --database $(SANDBOX_DIR)/pix-provider.db \
		--tls-dir $(SANDBOX_DIR)/pix-tls --webhook-secrets $(SANDBOX_WEBHOOK_SECRET) & \
	for i in $$(seq 1 100); do [ -f $(SANDBOX_DIR)/pix-tls/cliente.pem ] && break; sleep 0.1; done; \
	target/release/maquininha --listen $(MAQUININHA_LISTEN) --database $(SANDBOX_DIR)/maquininha.db \
		--notification-url http://$(API_LISTEN)/webhooks/maquininha --secret $(SANDBOX_MACHINE_SECRET) & \
	target/release/payment-api \
		--listen $(API_LISTEN) \
		$(if $(DATABASE_URL),--database-url "$(DATABASE_URL)",--database $(SANDBOX_DIR)/pagar-api.db) \
		--api-key $(API_KEY)=loja_sandbox \
		--admin-token $(ADMIN_TOKEN) \
		--pix-provider-url https://$(PIX_LISTEN) --pix-webhook-secrets $(SANDBOX_WEBHOOK_SECRET) \
		--pix-client-cert $(SANDBOX_DIR)/pix-tls/cliente.pem --pix-ca-cert $(SANDBOX_DIR)/pix-tls/ca.pem \
		--pix-webhook-url auto \
		--maquininha-url http://$(MAQUININHA_LISTEN) --maquininha-secret $(SANDBOX_MACHINE_SECRET) \
		--gateway-url http://$(ADQUIRENTE_LISTEN) & \
	wait

## replicas: two API replicas on 127.0.0.1:8081 and :8082 sharing one PostgreSQL database.
replicas: deps-pg
	@psql "$(PG_ADMIN_URL)" -tAc "SELECT 1 FROM pg_database WHERE datname = '$(PG_DATABASE)'" | grep -q 1 || \
		psql "$(PG_ADMIN_URL)" -c "CREATE DATABASE $(PG_DATABASE)"
	$(CARGO) build --release -p payment-api
	@echo "two replicas on one database: $(PG_URL) (Ctrl-C stops both)"
	@trap 'kill 0' INT TERM EXIT; \
	for port in 8081 8082; do \
		target/release/payment-api --listen 127.0.0.1:$$port --database-url "$(PG_URL)" \
			--api-key $(API_KEY)=loja_sandbox --admin-token $(ADMIN_TOKEN) & \
	done; wait

## deps-browser: Chromium and its WebDriver (chromedriver), for the simulators' web pages.
deps-browser:
	@missing=""; for p in chromium chromium-driver; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; $(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; fi

## maquininha: the card machine simulator on 127.0.0.1:8091; its page per terminal is
## http://127.0.0.1:8091/terminais/PAGAR_SIM__POS-1 .
maquininha:
	@mkdir -p $(SANDBOX_DIR)
	$(CARGO) run -p maquininha -- --database $(SANDBOX_DIR)/maquininha.db

## adquirente: the card acquirer simulator (card not present) on $(ADQUIRENTE_LISTEN), its
## ledger in $(SANDBOX_DIR)/adquirente.db; `GET /qa/ledger` lists its charges and refunds.
adquirente:
	@mkdir -p $(SANDBOX_DIR)
	$(CARGO) run -p adquirente -- --listen $(ADQUIRENTE_LISTEN) --database $(SANDBOX_DIR)/adquirente.db

## deps-pg: PostgreSQL for the multi-replica store and its tests, running on 127.0.0.1:5432.
deps-pg:
	@if ! command -v pg_ctlcluster >/dev/null || [ -z "$$(ls /etc/postgresql 2>/dev/null)" ]; then \
		echo "installing: postgresql"; $(SUDO) apt-get update && $(SUDO) apt-get install -y postgresql postgresql-client; \
		v=$$(ls /etc/postgresql | head -1); \
		$(SUDO) sed -i '1i host all postgres 127.0.0.1/32 trust' /etc/postgresql/$$v/main/pg_hba.conf; \
	fi
	@for v in $$(ls /etc/postgresql); do \
		$(SUDO) pg_ctlcluster --skip-systemctl-redirect $$v main start 2>/dev/null || true; \
	done
	@for i in $$(seq 1 30); do psql "$(PG_ADMIN_URL)" -tAc 'SELECT 1' >/dev/null 2>&1 && exit 0; sleep 1; done; \
		echo "PostgreSQL does not answer at $(PG_ADMIN_URL)"; exit 1

## test: formatting, clippy, and every test of the workspace (GUI tests drive the real window;
## the API suite also runs on PostgreSQL).
test: deps-gui deps-browser deps-pg deps-trials deps-openapi deps-node deps-fuse deps-nfce lint ui-test unit mutation-check

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# The app builds the payment API without its PostgreSQL store: that build is linted too.
	$(CARGO) clippy -p payment-api --no-default-features --lib --tests -- -D warnings

unit:
	PROPTEST_CASES=500 $(CARGO) test --workspace
	# The payment API as the app builds it: without its PostgreSQL store.
	$(CARGO) test -p payment-api --no-default-features --lib

## mutation-check: the power-cut trials must catch a till whose write-ahead is committed relaxed
## (`trial-client-mutant`: the till built with the `mutant` feature): every trial on power-cut
## filesystems; it fails when the mutant goes unnoticed. The servers and the runner are the
## ones `cargo test --workspace` builds (the same features: nothing is built again after `unit`).
mutation-check: deps-pg deps-fuse
	$(CARGO) test --workspace --no-run
	$(CARGO) build -p pagar-e2e --features mutant --bin trial-client-mutant
	target/debug/trials --trials 16 --seed 424242 --store sqlite --power 1 --jobs 4 \
		--client target/debug/trial-client-mutant --expect-violations

## properties: the property tests with all their cases (thousands each; `make test` runs 500).
properties:
	$(CARGO) test --workspace --test properties

## ui-test: the screen's state module (ui/state.js) under Node's own test runner.
ui-test: deps-node
	node --test ui/test/

## deps-node: Node.js (18 or newer: its built-in test runner) for the screen's unit tests.
deps-node:
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' 2>/dev/null \
		|| { $(SUDO) apt-get update && $(SUDO) apt-get install -y nodejs; }

## bench: every benchmark (the API, the checkout core, the app), each against a reference measured
## in the same run; then docs/benchmarks.md is rewritten with this run's figures.
## BENCH_BASE=<rev> also runs the API bench on that revision (its own worktree and target folder)
## and puts both runs' ratios side by side.
BENCH_OUT := target/bench
bench: deps-bench deps-gui deps-pg
	mkdir -p $(BENCH_OUT) && rm -f $(BENCH_OUT)/*.txt
	@if [ -n "$(BENCH_BASE)" ]; then \
		rm -rf $(BENCH_OUT)/base && git worktree prune && \
		git worktree add --detach $(BENCH_OUT)/base $(BENCH_BASE) && \
		set -o pipefail && (cd $(BENCH_OUT)/base && export CARGO_TARGET_DIR=$(CURDIR)/target/bench-base && \
			$(CARGO) build --release -p slowsync -p adquirente && \
			$(CARGO) bench -p payment-api --bench api) | tee $(BENCH_OUT)/api-base.txt; fi
	$(CARGO) build --release -p slowsync -p adquirente
	set -o pipefail; $(CARGO) bench -p payment-api --bench api | tee $(BENCH_OUT)/api.txt
	$(CARGO) build --release -p payment-api
	set -o pipefail; $(CARGO) bench -p checkout-core --bench outbox | tee $(BENCH_OUT)/outbox.txt
	$(CARGO) build --release -p pagar --example blank_window
	set -o pipefail; $(CARGO) bench -p pagar --bench startup | tee $(BENCH_OUT)/startup.txt
	BENCH_BASE=$(BENCH_BASE) scripts/bench-report.sh $(BENCH_OUT) > docs/benchmarks.md
	@echo "docs/benchmarks.md rewritten with this run"

## package: the installable Debian package, target/release/bundle/deb/Pagar_<version>_amd64.deb
## (Tauri's bundler: the app, its icon and a desktop entry named Pagar).
TAURI_CLI_VERSION := 2.12.4
package: deps-package
	cd src-tauri && $(CARGO) tauri build --bundles deb
	@ls -1 target/release/bundle/deb/*.deb

## package-test: the same .deb bundled from the app `cargo test --workspace` builds (Tauri's
## bundler around the dev profile's binary: the bundle is the same, the binary not optimised, so
## CI spends no release build on it), extracted (dpkg-deb -x), the packaged binary started under
## Xvfb on its embedded default, paying once through WebDriver; one charge in its ledger.
## PACKAGE_PROFILE=release tests the .deb `make package` makes instead.
PACKAGE_PROFILE ?= debug
package-test: deps-package
ifeq ($(PACKAGE_PROFILE),release)
	cd src-tauri && $(CARGO) tauri build --bundles deb
else
	$(CARGO) test --workspace --no-run
	cd src-tauri && $(CARGO) tauri bundle --debug --bundles deb
endif
	PAGAR_PACKAGED_DEB="$$(ls -t $(CURDIR)/target/$(PACKAGE_PROFILE)/bundle/deb/*.deb | head -1)" \
		$(CARGO) test --workspace --test gui package:: -- --ignored

## deps-package: the Tauri CLI at a pinned version (cargo install; minutes the first time).
deps-package: deps-gui
	@$(CARGO) tauri --version 2>/dev/null | grep -qx "tauri-cli $(TAURI_CLI_VERSION)" \
		|| $(CARGO) install tauri-cli --version $(TAURI_CLI_VERSION) --locked

## trials: randomized end-to-end fault trials with a checker (TRIALS, SEED, STORE=sqlite|postgres|mixed,
## JOBS, POWER: the share of trials on power-cut filesystems); a failing seed replays with
## `make trials TRIALS=1 SEED=<seed>`.
POWER ?= 0.5
trials: deps-pg deps-trials deps-fuse
	$(CARGO) build --release -p payment-api -p pix-provider -p adquirente -p maquininha -p sefaz -p pagar-e2e --bins
	target/release/trials --trials $(TRIALS) --seed $(SEED) --store $(STORE) --jobs $(JOBS) --power $(POWER)

## deps-openapi: the OpenAPI validator the API's document is checked with, and the generator of
## the client the integration test builds from it.
OPENAPI_PY := openapi-spec-validator openapi-python-client
deps-openapi:
	@{ python3 -c 'import openapi_spec_validator' 2>/dev/null && command -v openapi-python-client >/dev/null; } \
		|| python3 -m pip install --quiet $(OPENAPI_PY) \
		|| python3 -m pip install --quiet --break-system-packages $(OPENAPI_PY)

## deps-nfce: what the NFC-e is built and checked with: OpenSSL (its certificate and signature),
## libxml2's xmllint, xmlsec1 and zbarimg (tools Pagar did not write; the DANFE's test also
## draws it in Chromium, `make deps-browser`), and the official schemas of
## leiaute 4.00 in $(NFCE_XSD), taken from PyPI's nfelib, which packages the Portal da NF-e's
## schema package (its wheel checked against the hash below).
NFCE_XSD := target/nfce-xsd
NFELIB_WHEEL := nfelib-3.2.0-py3-none-any.whl
NFELIB_SHA256 := fbde31b31617e0f1865c3674d953ea4a4424c2dea5aaef001a73c188ec283be2
deps-nfce:
	@missing=""; for p in libssl-dev pkg-config openssl libxml2-utils xmlsec1 zbar-tools python3-pip; do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; $(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; fi
	@[ -f $(NFCE_XSD)/nfe_v4.00.xsd ] && [ -f $(NFCE_XSD)/evento/envEvento_v1.00.xsd ] || { \
		tmp=$$(mktemp -d) && \
		python3 -m pip download --quiet --no-deps --only-binary=:all: --dest $$tmp nfelib==3.2.0 && \
		echo "$(NFELIB_SHA256)  $$tmp/$(NFELIB_WHEEL)" | sha256sum --check --quiet && \
		mkdir -p $(NFCE_XSD)/evento $(NFCE_XSD)/cancelamento && \
		python3 -c 'import os, sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); dirs = {"nfelib/nfe/schemas/v4_0/": "", "nfelib/nfe_evento_generico/schemas/v1_0/": "evento", "nfelib/nfe_evento_cancel/schemas/v1_0/": "cancelamento"}; [open(os.path.join(sys.argv[2], d, os.path.basename(n)), "wb").write(z.read(n)) for n in z.namelist() for p, d in dirs.items() if n.startswith(p) and n.endswith(".xsd")]' \
			$$tmp/$(NFELIB_WHEEL) $(NFCE_XSD) && \
		rm -rf $$tmp; }

## sefaz: the SEFAZ simulator for NFC-e on 127.0.0.1:8093 (SP, homologação; web services under
## /ws/, QA under /qa/), its base in $(SANDBOX_DIR)/sefaz.db.
sefaz: deps-nfce
	@mkdir -p $(SANDBOX_DIR)
	$(CARGO) run -p sefaz -- --database $(SANDBOX_DIR)/sefaz.db --xsd-dir $(NFCE_XSD)

## nfce-sample: OUT=DIR gets the sandbox sale's NFC-e issued normally and in contingência, signed
## as they would be sent, their DANFEs, an inutilização of numbers 3 to 5, and the certificate
## that signed them; then checks each with the official schema (xmllint) and xmlsec1.
OUT ?= nfce-sample
nfce-sample: deps-nfce
	$(CARGO) run --quiet -p nfce --bin nfce-sample -- $(OUT)
	xmllint --noout --schema $(NFCE_XSD)/nfe_v4.00.xsd $(OUT)/nfce-normal.xml $(OUT)/nfce-contingencia.xml
	for f in normal contingencia; do \
		xmlsec1 --verify --id-attr:Id infNFe --trusted-pem $(OUT)/certificado.pem $(OUT)/nfce-$$f.xml || exit 1; \
	done
	xmllint --noout --schema $(NFCE_XSD)/inutNFe_v4.00.xsd $(OUT)/inutilizacao.xml
	xmlsec1 --verify --id-attr:Id infInut --trusted-pem $(OUT)/certificado.pem $(OUT)/inutilizacao.xml

## deps-fuse: FUSE's mount helper, for the power-cut filesystem's tests (crates/powercut).
deps-fuse:
	@command -v fusermount3 >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y fuse3; }
	@[ -e /dev/fuse ] || { echo "deps-fuse: /dev/fuse is missing: the power-cut tests need the kernel's FUSE"; exit 1; }

## deps-trials: libfaketime, which the trials use to jump a till's wall clock.
deps-trials:
	@dpkg -s faketime >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y faketime; }

deps-bench:
	@command -v wrk >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y wrk; }

fmt:
	$(CARGO) fmt --all

clean-sandbox:
	rm -rf $(SANDBOX_DIR)
