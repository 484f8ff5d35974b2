# Two entry points: `make demo` (train -> export -> index -> eval -> serve on generated data;
# `make demo PORT=8001` serves on another port) and `make test`. Both create the virtualenv they need.
PYTHON ?= python3
VENV ?= .venv
# faiss-gpu/onnxruntime-gpu and faiss-cpu/onnxruntime cannot live side by side: pick one set.
ACCEL ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
STAMP := $(VENV)/.installed-$(ACCEL)

.PHONY: setup demo test lint bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e ".[train,pretrained,tracking,milvus,$(ACCEL),dev]"
	rm -f $(VENV)/.installed-*
	touch $@

demo: setup
	PORT=$(PORT) bash scripts/demo.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash scripts/typecheck.sh

test: setup
	bash scripts/ensure-chromium.sh || echo "chromium unavailable: browser tests will be skipped"
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

# Every benchmark (a bench/*.py with a __main__ block) at full size; one that exits 77 lacks a prerequisite
# here (it says which) and is skipped. tests/test_bench_quick.py runs the same scripts with --quick.
bench: setup
	@for b in $$(grep -l '^if __name__ == "__main__":' bench/*.py); do \
		echo "== $$b"; $(VENV)/bin/python $$b; rc=$$?; \
		if [ $$rc = 77 ]; then echo "(skipped)"; elif [ $$rc != 0 ]; then exit 1; fi; \
	done

clean-venv:
	rm -rf $(VENV)
