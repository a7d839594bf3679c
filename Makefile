# Each target sets itself up on a fresh machine: a .venv at the repo root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench install tokenizer clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

demo: $(STAMP)
	$(BIN)/python -m loadtests.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/server_throughput.py
	$(BIN)/python benchmarks/server_memory.py

tokenizer: $(STAMP)
	$(BIN)/python -m llmchaos.tokenizer

clean:
	rm -rf $(VENV) results
