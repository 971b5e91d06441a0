# vLLM engine tests (python/tests/test_vllm*.py): the CtxtierConnector driven
# by vLLM's own scheduler against real ctxd processes, and ctxtier.hashing
# against vLLM's own hasher. vllm, torch and everything they need are pinned in
# python/requirements-engines.txt and installed into the same .venv/ as the
# client's test dependencies (python.mk), once per change of the pins. The
# file is a complete lock (pip freeze), installed with --no-deps: numpy stays at
# the client's pin (2.4.6) although mistral-common declares numpy<2.4, which
# nothing on this path uses (it serves Mistral tokenizers only).
ENGINES_REQS  := python/requirements-engines.txt
ENGINES_STAMP := $(VENV)/.ctxtier-engines-$(shell cksum < $(ENGINES_REQS) 2>/dev/null | cut -d' ' -f1)
ENGINES_TESTS := python/tests/test_vllm_hashing.py python/tests/test_vllm_engines.py python/tests/test_bench_and_tensors.py

.PHONY: engines-venv test-engines engines-vectors

$(ENGINES_STAMP): $(ENGINES_REQS) | py-venv
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps -r $(ENGINES_REQS)
	@rm -f $(VENV)/.ctxtier-engines-*
	@touch $@

engines-venv: py-venv $(ENGINES_STAMP) ## add vllm and torch (pinned, about 9 GiB) to .venv

test-engines: build engines-venv ## vLLM connector and hash tests against vLLM's own code and real ctxd processes
	CTXTIER_ENGINES=1 CTXTIER_BIN=$(CURDIR)/$(BIN) PYTHONHASHSEED=0 \
	  $(VENV)/bin/python -m pytest -q $(ENGINES_TESTS) $(PYTEST_ARGS)

engines-vectors: engines-venv ## rewrite ctxstore/block/testdata/vllm_vectors.json from the installed vllm
	$(VENV)/bin/python python/tools/gen_vllm_vectors.py
