# Everyday targets. The README's two commands do the set-up; these assume it was done.
PYTHON ?= .venv/bin/python

.PHONY: test fast lint bench bench-e2e proto format

test:
	$(PYTHON) -m pytest -q -n 2

fast:
	$(PYTHON) -m pytest -q -m "not slow"

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) tests/support/typecheck.py
	.venv/bin/lint-imports

format:
	$(PYTHON) -m ruff format .

bench:
	$(PYTHON) -m pytest bench --benchmark-enable --benchmark-columns=min,median,mean,ops -q

proto:
	$(PYTHON) -m twinlog.rpc.codegen
