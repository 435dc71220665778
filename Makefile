# Every target that needs Python sets up its own virtualenv from nothing (.venv), so a fresh
# clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= dev

.PHONY: demo test test-fast test-browser lint bench clean help

# The test-suite runs in PYTEST_WORKERS processes (pytest-xdist); tests/conftest.py gives each
# worker one compute thread per framework. `make test` uses `--dist loadfile`: one worker runs all
# of a test file, so module-scoped fixtures (converted models, measurements) are built once and
# the documentation examples of a page run in order in one process. The fast tests have neither,
# and spread best test by test (`make test-fast`).
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS)

help:
	@echo "make demo          - set up .venv and convert the shipped example model"
	@echo "make test          - set up .venv, run ruff and the whole test-suite (browser test only under CI=true)"
	@echo "make test-fast     - the inner loop: the test-suite without the slow tests (-m 'not slow')"
	@echo "make test-browser  - install Chromium if missing (apt-get, announced) and run the browser test"
	@echo "make bench         - print transpile throughput and the quick real-model corpus (docs/benchmarks.md)"
	@echo "make bench-wild    - install benchmarks/wild/requirements.txt and run the wild corpus' development half"
	@echo "make bench-harvest - install benchmarks/harvest/requirements.txt (--no-deps --target) and harvest the corpus"
	@echo "make clean         - remove .venv and build outputs"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[$(EXTRAS)]"
	@touch $(STAMP)

demo: $(STAMP)
	@echo "== PyTorch source: examples/precision_utils.py"
	@cat examples/precision_utils.py
	@echo
	@echo "== ptranspile examples/precision_utils.py --to jax --diff"
	-@$(BIN)/ptranspile examples/precision_utils.py --to jax --diff
	@echo
	@echo "== ptranspile examples/precision_utils.py --to tf -o out/precision_utils_tf.py --report-json out/report.json"
	-@$(BIN)/ptranspile examples/precision_utils.py --to tf -o out/precision_utils_tf.py --report-json out/report.json
	@cat out/precision_utils_tf.py
	@echo
	@echo "== numerical check of the dtype-level conversion (runs torch, JAX and TF on CPU)"
	@$(BIN)/python examples/check_dtype_conversion.py
	@echo
	@echo "== ptranspile examples/attention_block.py --to torch --policy mixed --report --diff"
	-@$(BIN)/ptranspile examples/attention_block.py --to torch --policy mixed --report --diff
	@echo
	@echo "== verify it: run the mixed model against the original (out/attention_block_verify.html)"
	@$(BIN)/ptranspile examples/attention_block.py --to torch --policy mixed -o out/attention_block_mixed.py \
		--verify --entry "AttentionBlock()" --input "float32[2,16,64]" \
		--report-json out/attention_block_verify.json --report-html out/attention_block_verify.html
	@echo
	@echo "== torch -> JAX (Flax NNX): convert the same block, copy the weights over, verify"
	@$(BIN)/ptranspile examples/attention_block.py --to jax -o out/attention_block_jax.py \
		--verify --entry "AttentionBlock()" --input "float32[2,16,64]" --max-layers 10
	@sed -n '/^class AttentionBlock/,$$p' out/attention_block_jax.py
	@echo
	@echo "== torch -> Keras 3: the same block as Keras layers, weights copied over, verified"
	@$(BIN)/ptranspile examples/attention_block.py --to tf -o out/attention_block_tf.py \
		--verify --entry "AttentionBlock()" --input "float32[2,16,64]" --max-layers 10
	@sed -n '/^class AttentionBlock/,$$p' out/attention_block_tf.py
	@echo
	@echo "== torch -> Keras 3 under --policy mixed (torch's autocast semantics as Keras dtype policies), verified"
	@$(BIN)/ptranspile examples/attention_block.py --to tf --policy mixed -o out/attention_block_tf_mixed.py \
		--verify --entry "AttentionBlock()" --input "float32[2,16,64]" --no-layers

# Locally `make test` installs nothing: the browser test is skipped with its reason. Under CI=true
# Chromium is installed first (announced in one line) and the browser test runs, failing without it.
test: $(STAMP)
	$(BIN)/ruff check precision_transpiler tests benchmarks examples
	@if [ "$${CI:-}" = "true" ]; then bash .ci/ensure-chromium "CI=true"; fi
	$(PYTEST) --dist loadfile -q --durations=25

test-fast: $(STAMP)
	$(PYTEST) -q -m "not slow"

test-browser: $(STAMP)
	bash .ci/ensure-chromium "make test-browser"
	PTRANSPILE_BROWSER_TESTS=1 $(BIN)/python -m pytest -q -m browser

lint: $(STAMP)
	$(BIN)/ruff check precision_transpiler tests benchmarks examples
	$(BIN)/ruff format --check precision_transpiler

bench: $(STAMP)
	$(BIN)/python benchmarks/transpile_throughput.py
	$(BIN)/python benchmarks/corpus.py --quick --targets jax,tf --policies fp32,mixed

# The wild corpus (benchmarks/wild/cases.yaml): real model code from 16 more sources, pinned in
# benchmarks/wild/requirements.txt (installing them only adds packages to .venv). This runs the
# development half; the blind half (`--half blind`) is measured only at the end. Hours on 2 cores.
.PHONY: bench-wild
bench-wild: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r benchmarks/wild/requirements.txt
	@mkdir -p benchmarks/results
	$(BIN)/python benchmarks/corpus.py --suite wild --half dev --targets jax,tf --policies fp32,mixed \
		--json benchmarks/results/wild_dev.json --markdown benchmarks/results/wild_dev.md

# The harvested corpus (benchmarks/harvest): 54 pinned torch packages, every Module class built and
# fed by rule, frozen into benchmarks/harvest/cases/<package>.yaml. The packages go into a folder of
# their own (pip --no-deps --target), never into .venv, whose torch / JAX / TensorFlow stay pinned;
# the harvester puts that folder on the path after .venv. About an hour on 2 cores.
# benchmarks/harvest/run.py then converts and verifies the cases (the `look` half by default).
HARVEST_SITE ?= build/harvest-site
.PHONY: bench-harvest
$(HARVEST_SITE)/.installed: benchmarks/harvest/requirements.txt | $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
		--target $(HARVEST_SITE) -r benchmarks/harvest/requirements.txt
	@touch $@

bench-harvest: $(STAMP) $(HARVEST_SITE)/.installed
	$(BIN)/python benchmarks/harvest/harvest.py --site $(HARVEST_SITE) --jobs 2

clean:
	rm -rf $(VENV) build dist out *.egg-info .pytest_cache .ruff_cache

# Ivy side by side (docs/benchmarks.md): Ivy's transpiler in its own venv (its output fails on
# this project's jax/keras), ptranspile in .venv, the same cases, one merged table. Slow
# (minutes per Ivy transpile) and a ~2.5 GB venv, so it is not part of `make test` or `make bench`.
IVY_VENV ?= .venv-ivy
IVY_OUT ?= out/ivy_baseline

$(IVY_VENV)/.installed: benchmarks/ivy_baseline/requirements.txt
	bash benchmarks/ivy_baseline/setup.sh $(IVY_VENV)
	@touch $@

.PHONY: bench-ivy
bench-ivy: $(STAMP) $(IVY_VENV)/.installed
	@mkdir -p $(IVY_OUT)
	$(IVY_VENV)/bin/python benchmarks/ivy_baseline/run_ivy.py --json $(IVY_OUT)/ivy.json --markdown $(IVY_OUT)/ivy.md
	$(BIN)/python benchmarks/ivy_baseline/ours.py --json $(IVY_OUT)/ours.json --markdown $(IVY_OUT)/ours.md
	$(BIN)/python benchmarks/ivy_baseline/compare.py --ivy $(IVY_OUT)/ivy.json --ours $(IVY_OUT)/ours.json \
		--markdown $(IVY_OUT)/side_by_side.md
