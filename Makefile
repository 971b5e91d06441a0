# ctxtier — run `make help` for the targets.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
FUZZTIME ?= 60s
# Test binaries run with the race detector; the whole suite must stay well under 20 minutes.
TEST_TIMEOUT ?= 20m

.PHONY: help build run test test-race test-console bench fuzz soak lint clean reliability

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-12s %s\n", $$1, $$2}'

build: ## build ctxd, ctxctl and ctxbench into ./bin
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

run: build ## start a single-node ctxd with embedded defaults (data in ./ctxd-data)
	$(BIN)/ctxd $(ARGS)

test: lint ## the whole test suite: Go with the race detector, then the Python client's (py-test)
	$(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(PKGS)
	$(MAKE) --no-print-directory py-test

test-race: ## the Go tests with the race detector (test without lint and without the Python tests)
	$(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(PKGS)

bench: build ## Go micro-benchmarks, then the ctxbench load run against a local ctxd
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	scripts/bench-load.sh

test-console: ## the console's browser test alone: headless chromium against 3 real ctxd (screenshots in $$CTXTIER_SCREENSHOTS)
	$(GO) test -race -count=1 -run 'TestConsoleBrowser' -v -timeout 5m ./cmd/ctxd/

soak: ## long-running checks: 2-minute memory-bound load against a real ctxd
	CTXTIER_SOAK=2m $(GO) test -count=1 -run 'TestMemoryBoundedUnderEvictingLoad' -v -timeout 10m ./cmd/ctxd/

reliability: ## faults against real 3-node clusters (rolling restarts, 20 leader kills, lost NVMe dir); prints a table
	set -o pipefail; CTXTIER_RELIABILITY=full CTXTIER_RELIABILITY_OUT=$(or $(OUT),reliability.txt) $(GO) test -count=1 -run 'TestReliability' -v -timeout 60m ./cmd/ctxd/ | grep -v '^=== '

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	scripts/fuzz.sh $(FUZZTIME)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean: ## remove build outputs and the default data directory
	rm -rf $(BIN) ctxd-data
include deploy/deploy.mk
include cluster.mk
-include s3.mk
include python.mk
# engines.mk: make test-engines (vLLM's own scheduler and the connector against real ctxd processes).
-include engines.mk
-include resp.mk
