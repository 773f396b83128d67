# icebox — `make run` and `make test` install what they need on a fresh Debian 12 machine.
SHELL := /bin/bash
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: setup build run test lint test-rust test-runtimes test-functions test-bench bench bench-frozen-garbage bench-headline soak clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# iceboxd flags go in RUN_ARGS, e.g. make run RUN_ARGS='--offload faasmem --offload-pool zram:4GiB'
RUN_ARGS ?=
run: build
	@scripts/run.sh $(RUN_ARGS)

# Every suite runs, also after one fails; a summary at the end says which failed.
test: build
	CARGO=$(CARGO) scripts/test.sh

# Formatting and lints are part of the test: a warning fails it (docs/development.md).
lint:
	CARGO=$(CARGO) scripts/test.sh fmt clippy ruff eslint machete

test-rust:
	CARGO=$(CARGO) scripts/test.sh rust

test-runtimes:
	scripts/test.sh runtime-python runtime-nodejs runtime-java

test-functions:
	scripts/test.sh functions-python functions-nodejs functions-java

test-bench:
	scripts/test.sh bench bench-node

bench: build
	python3 bench/node/run_all.py --out docs/performance.md

# Load + faults (docs/reliability.md): e.g. make soak SOAK_ARGS='--clients 20 --duration 30'
SOAK_ARGS ?=
soak: build
	.venv/bin/icebox-bench soak --out runs/soak $(SOAK_ARGS)

bench-frozen-garbage: build
	.venv/bin/icebox-bench run frozen-garbage --out runs/frozen-garbage

# The headline run (docs/headline.md): ~30 minutes; HEADLINE_ARGS=--quick for the <= 5-minute check.
HEADLINE_ARGS ?=
bench-headline: build
	.venv/bin/icebox-bench run headline --out runs/headline-$$(date +%Y%m%d-%H%M%S) $(HEADLINE_ARGS)

clean:
	$(CARGO) clean
	rm -rf .venv runtimes/java/target examples/java/target
