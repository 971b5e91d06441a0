# vLLM engine tests (python/tests/test_vllm*.py): the CtxtierConnector driven
# by vLLM's own scheduler against real ctxd processes, and ctxtier.hashing
# against vLLM's own hasher. vllm, torch and everything they need are pinned in
# python/requirements-engines.txt and installed into the same .venv/ as the
# client's test dependencies (python.mk), once per change of the pins. The
# file is a lock (pip freeze, less GPU-only extras), installed with --no-deps: numpy stays at
# the client's pin (2.4.6) although mistral-common declares numpy<2.4, which
# nothing on this path uses (it serves Mistral tokenizers only).
ENGINES_REQS  := python/requirements-engines.txt
ENGINES_STAMP := $(VENV)/.ctxtier-engines-$(shell cksum < $(ENGINES_REQS) 2>/dev/null | cut -d' ' -f1)
ENGINES_TESTS := python/tests/test_vllm_hashing.py python/tests/test_vllm_engines.py python/tests/test_bench_and_tensors.py python/tests/test_weights_torch.py

.PHONY: engines-venv test-engines engines-vectors

# scripts/engines-venv.sh checks the free disk first (exit 3 when the set
# cannot fit) and installs without pip's cache, one group of wheels at a time.
engines-venv: py-venv ## add vllm and torch (pinned, about 6.3 GiB) to .venv
	@scripts/engines-venv.sh $(VENV) $(ENGINES_REQS) $(ENGINES_STAMP)

# A machine without the disk for the set prints SKIP with the numbers and
# passes, as compose-e2e does without a Docker engine; any other failure fails.
test-engines: build py-venv ## vLLM connector and hash tests against vLLM's own code and real ctxd processes
	@rc=0; scripts/engines-venv.sh $(VENV) $(ENGINES_REQS) $(ENGINES_STAMP) || rc=$$?; \
	  if [ $$rc -eq 3 ]; then echo "SKIP test-engines: not enough free disk for the pinned vllm/torch set (message above)"; exit 0; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  echo "CTXTIER_ENGINES=1 $(VENV)/bin/python -m pytest -q $(ENGINES_TESTS) $(PYTEST_ARGS)"; \
	  CTXTIER_ENGINES=1 CTXTIER_BIN=$(CURDIR)/$(BIN) PYTHONHASHSEED=0 \
	    $(VENV)/bin/python -m pytest -q $(ENGINES_TESTS) $(PYTEST_ARGS)

engines-vectors: engines-venv ## rewrite ctxstore/block/testdata/vllm_vectors.json from the installed vllm
	$(VENV)/bin/python python/tools/gen_vllm_vectors.py
