# icebox — `make run` and `make test` install what they need on a fresh Debian 12 machine.
SHELL := /bin/bash
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: setup build run test test-rust test-runtimes bench clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

run: build
	@scripts/run.sh

test: build
	$(MAKE) --no-print-directory test-rust test-runtimes

test-rust:
	$(CARGO) test --release --workspace

test-runtimes:
	.venv/bin/python -m pytest -q runtimes/python/tests
	node --test runtimes/nodejs/test/
	mvn -B -q -f runtimes/java/pom.xml test

bench: build
	python3 bench/node/run_all.py --out docs/performance.md

clean:
	$(CARGO) clean
	rm -rf .venv runtimes/java/target examples/java/target
