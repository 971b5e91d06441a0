# ctxtier — run `make help` for the targets.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
FUZZTIME ?= 60s
# Test binaries run with the race detector; the whole suite must stay well under 20 minutes.
TEST_TIMEOUT ?= 20m
# STRICT=1: a test whose real dependency is missing fails instead of
# skipping (CI=true does the same; internal/testdep).
STRICT   ?= 0
# Every test's output goes to TEST_LOG; the output of passed tests matching
# TEST_SHOW (the partition timings) is printed too.
TEST_LOG  ?= test.log
TEST_SHOW ?= Partition
# go test -json through internal/testtally: failures in full, the skipped
# tests with their reasons, and last the line "N passed, N failed, N skipped".
GOTEST = set -o pipefail; CTXTIER_STRICT=$(STRICT) $(GO) test -json -race -timeout $(TEST_TIMEOUT) -count=1 $(PKGS) \
	| $(GO) run ./internal/testtally -log $(TEST_LOG) -show '$(TEST_SHOW)'

.PHONY: help build run test test-race test-deps test-console bench fuzz soak lint lint-tools clean reliability

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-12s %s\n", $$1, $$2}'

build: ## build ctxd, ctxctl and ctxbench into ./bin
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

run: build ## start a single-node ctxd with embedded defaults (data in ./ctxd-data)
	$(BIN)/ctxd $(ARGS)

test: lint test-deps ## the whole test suite: Go with the race detector, then the Python client's (py-test); STRICT=1: missing dependencies fail
	$(GOTEST)
	$(MAKE) --no-print-directory py-test

test-race: ## same as test, without lint and test-deps
	$(GOTEST)

test-deps: ## install (as root with apt-get) or list what the tests need: curl, s3cmd, iproute2, chromium, versitygw
	CTXTIER_STRICT=$(STRICT) scripts/test-deps.sh

bench: build ## Go micro-benchmarks, then the ctxbench load run against a local ctxd
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	scripts/bench-load.sh

test-console: ## the console's browser test alone: headless chromium against 3 real ctxd (screenshots in $$CTXTIER_SCREENSHOTS)
	$(GO) test -race -count=1 -run 'TestConsoleBrowser' -v -timeout 5m ./cmd/ctxd/

soak: ## long-running checks: 2-minute memory-bound load against a real ctxd
	CTXTIER_SOAK=2m $(GO) test -count=1 -run 'TestMemoryBoundedUnderEvictingLoad' -v -timeout 10m ./cmd/ctxd/

reliability: ## faults against real 3-node clusters (rolling restarts, 20 leader kills, lost NVMe dir, partitions, a full disk); prints a table
	set -o pipefail; CTXTIER_RELIABILITY=full CTXTIER_RELIABILITY_OUT=$(or $(OUT),reliability.txt) $(GO) test -count=1 -run 'TestReliability' -v -timeout 60m ./cmd/ctxd/ | grep -v '^=== '

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	scripts/fuzz.sh $(FUZZTIME)

# golangci-lint, pinned, built from source into TOOLS by lint-tools (a few
# minutes on 2 cores the first time; reused while the version matches).
GOLANGCI_LINT_VERSION ?= v2.15.0
TOOLS         ?= $(BIN)/tools
GOLANGCI_LINT  = $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)

lint: lint-tools ## gofmt, go vet, then golangci-lint with .golangci.yml (errorlint, revive, staticcheck, errcheck...)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOLANGCI_LINT) run $(PKGS)

lint-tools: $(GOLANGCI_LINT) ## install the pinned golangci-lint into bin/tools (built from source with go install)

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(abspath $(TOOLS))/.install $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS)/.install/golangci-lint $@ && rmdir $(TOOLS)/.install

clean: ## remove build outputs, the test log and the default data directory
	rm -rf $(BIN) ctxd-data $(TEST_LOG)
include deploy/deploy.mk
include cluster.mk
-include s3.mk
include python.mk
# engines.mk: make test-engines (vLLM's own scheduler and the connector against real ctxd processes).
-include engines.mk
-include resp.mk
