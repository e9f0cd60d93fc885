# Chat Messaging Gateway — every developer and CI task. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
PG_URL ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: run
run: ## start the gateway on the embedded SQLite database (./data)
	@echo "Starting the gateway on http://$${LISTEN_ADDR:-127.0.0.1:8080} (SQLite in ./data)."
	@echo "In another shell, create a company and a token:"
	@echo "  go run ./cmd/gateway admin bootstrap --company Acme --email admin@acme.test --permissions all"
	CONNECTOR_DRIVER="$${CONNECTOR_DRIVER:-simulator}" $(GO) run ./cmd/gateway serve

.PHONY: demo
demo: ## everything on one machine: gateway (SQLite, :8090), provider and chat-app simulators, an event printer; Ctrl-C stops
	CONNECTOR_DRIVER=simulator $(GO) run ./cmd/demo

.PHONY: build
build: ## build bin/gateway
	$(GO) build -o bin/gateway ./cmd/gateway

# make release: the Go toolchain go.mod names, and flags fixed here so that two builds of one
# commit give the same bytes (CHANGELOG.md, "Reproducible builds").
RELEASE_GO := go$(shell sed -n 's/^go //p' go.mod)
RELEASE_PLATFORMS := linux/amd64 linux/arm64
RELEASE_FLAGS := -trimpath -buildvcs=true -ldflags='-s -w -buildid='

.PHONY: release
release: ## static linux/amd64 and linux/arm64 binaries in dist/ with SHA256SUMS (CGO_ENABLED=0, -trimpath, fixed flags: reproducible)
	@if [ -n "$$(git status --porcelain)" ]; then echo "warning: the work tree has changes; the version will say +dirty"; fi
	rm -rf dist && mkdir -p dist
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; echo "==> dist/gateway-$$os-$$arch"; \
		env CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOAMD64=v1 GOARM64=v8.0 GOTOOLCHAIN=$(RELEASE_GO) GOFLAGS=-mod=readonly \
			$(GO) build $(RELEASE_FLAGS) -o dist/gateway-$$os-$$arch ./cmd/gateway || exit 1; \
	done
	cd dist && sha256sum gateway-* > SHA256SUMS && cat SHA256SUMS
	@if [ "$$($(GO) env GOOS)/$$($(GO) env GOARCH)" = linux/amd64 ]; then dist/gateway-linux-amd64 version; fi

.PHONY: release-verify
release-verify: ## build the release twice, from two fresh clones of HEAD with empty build caches, and compare SHA256SUMS
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for n in 1 2; do \
		git clone -q --no-local . "$$tmp/clone$$n" && git -C "$$tmp/clone$$n" checkout -q $$(git rev-parse HEAD) && \
		GOCACHE="$$tmp/cache$$n" $(MAKE) -s -C "$$tmp/clone$$n" release >/dev/null || exit 1; \
	done; \
	if cmp -s "$$tmp/clone1/dist/SHA256SUMS" "$$tmp/clone2/dist/SHA256SUMS"; then \
		echo "reproducible: two clones of $$(git rev-parse --short HEAD) built the same bytes"; cat "$$tmp/clone1/dist/SHA256SUMS"; \
	else diff "$$tmp/clone1/dist/SHA256SUMS" "$$tmp/clone2/dist/SHA256SUMS"; exit 1; fi

.PHONY: check-manifests
check-manifests: ## deploy/kubernetes decodes strictly into the Kubernetes API types (k8s.io/api) and its references hold (deploy/kubecheck)
	cd deploy/kubecheck && $(GO) run . ../kubernetes

.PHONY: check-deploy
check-deploy: check-manifests ## check-manifests, then: every variable of the kit is a setting, and the binary starts with exactly its environment and answers its probes (PostgreSQL when TEST_DATABASE_URL is set; also part of test-go)
	$(GO) test -count=1 -v ./deploy/

.PHONY: check-alerts
check-alerts: ## promtool (Debian's prometheus package) checks deploy/alerts.yaml and runs its unit tests
	promtool check rules deploy/alerts.yaml
	promtool test rules deploy/alerts_test.yaml

.PHONY: generate
generate: ## regenerate gen/ from openapi/openapi.yaml and asyncapi/asyncapi.yaml, bundle the docs renderers (gen/docs) and build the console (gen/console)
	$(GO) generate ./openapi/ ./asyncapi/ ./internal/docs/ ./internal/console/

.PHONY: generate-check
generate-check: generate ## fail when gen/ is not what a fresh generate produces
	@if [ -n "$$(git status --porcelain -- gen/)" ]; then \
		git status --porcelain -- gen/; git --no-pager diff --stat -- gen/; \
		echo "gen/ is stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: lint
lint: ## gofmt, go vet, and the import arrows (capabilities never import the HTTP adapter)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	@bad=$$($(GO) list -f '{{.ImportPath}} {{join .Imports " "}}' ./internal/... | \
		grep -vE '^github.com/chatmsg/gateway/internal/(app|httpapi|apitest)[ /]' | \
		grep -E ' github.com/chatmsg/gateway/(gen/api|internal/httpapi|internal/app)( |$$)' || true); \
		if [ -n "$$bad" ]; then echo "import arrows broken (capabilities must not import gen/api, httpapi or app):"; echo "$$bad"; exit 1; fi
	@if $(GO) list -deps -test ./internal/providersim/... ./cmd/providersim/ | grep -qx 'github.com/chatmsg/gateway/internal/official'; then \
		echo "internal/providersim must not import internal/official: the simulator is built from the provider's document, not from the client"; exit 1; fi

.PHONY: lint-specs
lint-specs: ## validate both documents with the pinned npm linters (Redocly, Spectral, AsyncAPI CLI)
	.tools/lint-specs.sh

.PHONY: test
test: generate-check lint lint-specs check-manifests check-alerts test-go contract test-docs test-clients test-console ## every test: generate check, lint, specs, the deployment manifests and alert rules, Go tests (SQLite, and PostgreSQL when TEST_DATABASE_URL is set), contracts, the docs page in a browser, the generated TypeScript client, the console in a browser

.PHONY: test-go
test-go: ## Go tests (PostgreSQL too when TEST_DATABASE_URL is set)
	$(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-docs
test-docs: ## /docs in Debian's chromium (playwright-core): every operation and event, search, no request off the host; screenshots in .tools/docs/artifacts
	$(GO) test -tags browser -count=1 -run TestDocsPageInChromium ./internal/docs/

.PHONY: test-clients
test-clients: ## generated-client suite: a TypeScript client from openapi.yaml (openapi-typescript + openapi-fetch), tsc --noEmit, run against a live gateway and the simulators, every answer validated
	$(GO) test -tags clientts -count=1 -run TestTypeScriptClient ./contracttests/clientts/

.PHONY: test-console
test-console: ## /console in Debian's chromium (playwright-core): pairing, sends on both platforms seen in the delivery log, redelivery, permissions, axe-core, no request off the host; screenshots in .tools/console/artifacts
	$(GO) test -tags browser -count=1 -timeout 10m -run TestConsoleInChromium ./internal/console/

.PHONY: test-pg
test-pg: ## Go tests against the local PostgreSQL as well
	TEST_DATABASE_URL="$(PG_URL)" $(GO) test -race -count=1 -timeout 30m ./...

.PHONY: contract
contract: ## Pact consumer then provider tests, in process and against a separately started gateway (fetches libpact_ffi into .tools/pact); PROVIDER_URL=… verifies the committed HTTP pact against that running gateway instead
	PROVIDER_URL="$(PROVIDER_URL)" contracttests/tools/run.sh

.PHONY: load
load: ## load scenarios through the public API of the real binaries, 3 runs, median and spread (LOADGEN_DB=postgres|sqlite|both, LOADGEN_SCENARIOS, LOADGEN_DURATION, LOADGEN_RATE, LOADGEN_CONNS, ARGS=…)
	$(GO) build -o bin/ ./cmd/gateway ./cmd/providersim ./cmd/loadgen
	bin/loadgen run -bin-dir bin $(ARGS)

.PHONY: chaos
chaos: ## fault suite: SIGKILL the gateway and terminate its PostgreSQL backends under load, on both databases; fails on any lost or duplicate send or event
	$(GO) build -o bin/ ./cmd/gateway ./cmd/providersim ./cmd/loadgen
	bin/loadgen chaos -bin-dir bin -db $${LOADGEN_DB:-both} $(ARGS)

.PHONY: cluster
cluster: ## multi-host fault suite (root): 3 replicas in network namespaces behind HAProxy on one PostgreSQL and Redis of its own; rolling upgrade, SIGKILL, network cut, PostgreSQL restart, Redis stop under load
	$(GO) build -o bin/ ./cmd/gateway ./cmd/providersim ./cmd/clustertest
	bin/clustertest build-old bin/gateway-old
	bin/clustertest -bin-dir bin -old-gateway bin/gateway-old $(ARGS)

FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzRequestBody FuzzProviderWebhook FuzzMultipartSend FuzzContactChannelQuery

.PHONY: fuzz
fuzz: ## run each fuzz target of the HTTP edge for FUZZTIME (default 30s; its seeds run in make test)
	@for target in $(FUZZ_TARGETS); do \
		echo "==> $$target ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./internal/httpapi/ || exit 1; \
	done

.PHONY: bench
bench: ## benchmarks (PostgreSQL ones when TEST_DATABASE_URL is set)
	$(GO) test -run '^$$' -bench . -benchtime 3s ./...
