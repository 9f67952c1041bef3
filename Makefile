# Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: install demo test lint bench bench-quality bench-lifecycle bench-scale chaos worker beat flower migrate clean

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

lint: $(STAMP)
	$(BIN)/ruff check memoryd tests bench
	$(BIN)/ruff format --check memoryd tests bench
	$(BIN)/mypy memoryd

test: lint
	$(BIN)/python -m pytest -q --durations=15

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/maintenance.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/replacement.py
	$(BIN)/python bench/async_client.py
	$(BIN)/python bench/http.py

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
	$(BIN)/celery -A memoryd.worker beat --loglevel=INFO

flower: $(STAMP)
	$(BIN)/celery -A memoryd.worker flower

clean:
	rm -rf .memoryd .memoryd-demo .pytest_cache .mypy_cache .ruff_cache
