#!/usr/bin/env bash
# Every suite runs even when an earlier one fails, so one failure does not hide another;
# the exit status is non-zero if any failed, and one summary says which.
# Arguments name the suites to run (default: all), e.g. scripts/test.sh fmt clippy
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

declare -a names=() results=()
failed=0

wanted=" $* "

suite() {
    local name=$1
    shift
    if [ -n "${wanted// /}" ] && [[ $wanted != *" $name "* ]]; then
        return 0
    fi
    echo "=== suite $name: $*"
    local start=$SECONDS
    if "$@"; then
        results+=("passed  $name ($((SECONDS - start)) s)")
    else
        results+=("FAILED  $name ($((SECONDS - start)) s)")
        failed=$((failed + 1))
    fi
    names+=("$name")
}

# Both halves run, so a lint failure does not hide unformatted files. ruff.toml says what is checked.
ruff_all() {
    local rc=0
    .venv/bin/ruff check . || rc=1
    .venv/bin/ruff format --check . || rc=1
    return $rc
}

suite fmt "$CARGO" fmt --all --check
suite clippy "$CARGO" clippy --release --workspace --all-targets -- -D warnings
suite ruff ruff_all
# eslint.config.mjs says what is checked; scripts/setup.sh installs the pinned ESLint.
suite eslint scripts/eslint/node_modules/.bin/eslint --max-warnings 0 .
# As a cargo subcommand: run bare, cargo-machete misreads its arguments when $CARGO is set.
suite machete env PATH="$PWD/.tools/cargo/bin:$PATH" "$CARGO" machete
# --no-fail-fast: one failing test binary must not hide the others.
suite rust "$CARGO" test --release --workspace --no-fail-fast
suite runtime-python .venv/bin/python -m pytest -q runtimes/python/tests
suite runtime-nodejs node --test runtimes/nodejs/test/
suite runtime-java mvn -B -f runtimes/java/pom.xml test
suite functions-python .venv/bin/python -m pytest -q functions/python/tests
suite functions-nodejs node --test functions/nodejs/test/
suite functions-java mvn -B -f functions/java/pom.xml test
suite bench .venv/bin/python -m pytest -q bench/tests
suite bench-node python3 -m unittest discover -s bench/node -p 'test_*.py'

echo
echo "=== summary"
printf '%s\n' "${results[@]}"
echo "suites: $((${#names[@]} - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
