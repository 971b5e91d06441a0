# S3 endpoint: the real Python S3 clients its tests drive (boto3 and the aws
# cli, pinned in python/requirements-s3.txt, installed into .venv) and the S3
# conformance run.
PYTHON   ?= python3
VENV     ?= .venv
S3_REQS  := python/requirements-s3.txt
S3_STAMP := $(VENV)/.ctxtier-s3-$(shell cat $(S3_REQS) 2>/dev/null | cksum | cut -d' ' -f1)

.PHONY: s3-venv s3-conformance s3-conformance-gate

$(S3_STAMP): $(S3_REQS)
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(S3_REQS)
	@rm -f $(VENV)/.ctxtier-s3-*
	@touch $@

s3-venv: $(S3_STAMP) ## create .venv with the pinned S3 clients (boto3, aws cli) the S3 tests drive

# gateway/s3api's TestBoto3 and TestAWSCLI run the clients from .venv (and fail
# under CI=true without them); the conformance gate (208 tests) takes 35-80 s here.
test test-race: s3-venv s3-conformance-gate

s3-conformance: ## versitygw's S3 test suite against a real ctxd; per-operation summary in s3-conformance-out/
	scripts/s3-conformance.sh $(SUITE)

s3-conformance-gate: ## the versitygw S3 tests ctxd passes (scripts/s3-conformance-gate.txt) must all pass
	OUT=$(CURDIR)/s3-conformance-out/gate scripts/s3-conformance.sh --gate scripts/s3-conformance-gate.txt
