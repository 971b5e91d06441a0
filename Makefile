# ctxtier — run `make help` for the targets.
SHELL := /usr/bin/env bash
export PATH := /usr/local/go/bin:$(PATH)
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
FUZZTIME ?= 60s
# Test binaries run with the race detector; the whole suite must stay well under 20 minutes.
TEST_TIMEOUT ?= 20m

.PHONY: help build run test test-race bench fuzz soak lint clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-12s %s\n", $$1, $$2}'

build: ## build ctxd, ctxctl and ctxbench into ./bin
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

run: build ## start a single-node ctxd with embedded defaults (data in ./ctxd-data)
	$(BIN)/ctxd $(ARGS)

test: lint ## the whole test suite, with the race detector
	$(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(PKGS)

test-race: ## same as test, without lint
	$(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(PKGS)

bench: build ## Go micro-benchmarks, then the ctxbench load run against a local ctxd
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	scripts/bench-load.sh

soak: ## long-running checks: 2-minute memory-bound load against a real ctxd
	CTXTIER_SOAK=2m $(GO) test -count=1 -run 'TestMemoryBoundedUnderEvictingLoad' -v -timeout 10m ./cmd/ctxd/

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
-include resp.mk
