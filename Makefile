# icebox — `make run` and `make test` install what they need on a fresh Debian 12 machine.
SHELL := /bin/bash
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: setup build run test lint test-rust test-runtimes test-functions test-bench bench bench-frozen-garbage soak clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

run: build
	@scripts/run.sh

test: build
	$(MAKE) --no-print-directory lint test-rust test-runtimes test-functions test-bench

# Formatting and lints are part of the test: a warning fails it.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test-rust:
	$(CARGO) test --release --workspace

test-runtimes:
	.venv/bin/python -m pytest -q runtimes/python/tests
	node --test runtimes/nodejs/test/
	mvn -B -f runtimes/java/pom.xml test

test-functions:
	.venv/bin/python -m pytest -q functions/python/tests
	node --test functions/nodejs/test/
	mvn -B -f functions/java/pom.xml test

test-bench:
	.venv/bin/python -m pytest -q bench/tests
	python3 -m unittest discover -s bench/node -p 'test_*.py'

bench: build
	python3 bench/node/run_all.py --out docs/performance.md

# Load + faults (docs/reliability.md): e.g. make soak SOAK_ARGS='--clients 20 --duration 30'
SOAK_ARGS ?=
soak: build
	.venv/bin/icebox-bench soak --out runs/soak $(SOAK_ARGS)

bench-frozen-garbage: build
	.venv/bin/icebox-bench run frozen-garbage --out runs/frozen-garbage

clean:
	$(CARGO) clean
	rm -rf .venv runtimes/java/target examples/java/target
