#!/usr/bin/env bash
# Installs everything icebox needs on a fresh Debian 12 machine, then builds what `make run`
# and `make test` use. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    say "not root: cannot apt-get install $*; install it yourself (icebox runs unisolated without root)"
    return 1
  fi
}

apt_packages=()
command -v crun >/dev/null || apt_packages+=(crun)
[ -x /usr/bin/tini ] || apt_packages+=(tini)
command -v mvn >/dev/null || apt_packages+=(maven)
command -v javac >/dev/null || apt_packages+=(openjdk-17-jdk-headless)
command -v node >/dev/null || apt_packages+=(nodejs)
command -v npm >/dev/null || apt_packages+=(npm)
[ -x /usr/bin/python3 ] || apt_packages+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || apt_packages+=(python3-venv)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || apt_packages+=(python3-pip)
command -v cc >/dev/null || apt_packages+=(build-essential)
# The warm-latency benchmark measures one haproxy hop as a baseline.
command -v haproxy >/dev/null || apt_packages+=(haproxy)
# The cluster tests and the cluster benchmark run a real 3-member etcd (docs/cluster.md);
# etcd-client gives etcdctl, to look at the keys.
command -v etcd >/dev/null || apt_packages+=(etcd-server)
command -v etcdctl >/dev/null || apt_packages+=(etcd-client)
if [ ${#apt_packages[@]} -gt 0 ] && need_root "${apt_packages[*]}"; then
  say "apt-get install ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || { say "cargo not found: install Rust (rustup) first"; exit 1; }
# `make test` checks formatting and lints: rustfmt and clippy are part of the toolchain.
for component in rustfmt clippy; do
  tool=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
  if ! cargo "$tool" --version >/dev/null 2>&1; then
    say "installing the Rust component $component"
    rustup component add "$component" || { say "cannot install $component: install it with rustup"; exit 1; }
  fi
done

# cargo-machete (the `machete` suite: crate dependencies declared but never used), built once
# into .tools/cargo; the version is pinned so a new release cannot fail `make lint` by itself.
MACHETE_VERSION=0.9.2
# Without CARGO in its environment, or it takes --version for a subcommand name.
if [ "$(env -u CARGO .tools/cargo/bin/cargo-machete --version 2>/dev/null)" != "$MACHETE_VERSION" ]; then
  say "installing cargo-machete $MACHETE_VERSION into .tools/cargo"
  cargo install --quiet --locked cargo-machete --version "$MACHETE_VERSION" --root .tools/cargo \
    || say "warning: cargo-machete did not install; the machete suite will fail"
fi

# Python virtualenv for test tools (pytest) and, later, the bench harness.
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -c 'import pytest' 2>/dev/null || .venv/bin/pip install -q pytest
# The `lint` extra is ruff, which `make lint` runs over all the Python.
if [ ! -f .venv/.icebox-bench-installed ] || [ bench/pyproject.toml -nt .venv/.icebox-bench-installed ] \
    || [ ! -x .venv/bin/ruff ] || ! .venv/bin/python -c 'import icebox_bench' 2>/dev/null; then
  say "installing the bench harness (icebox-bench) and ruff"
  .venv/bin/pip install -q -e 'bench[test,lint]' && touch .venv/.icebox-bench-installed
fi

# Packages the benchmark functions import, installed inside each runtime's directory (the
# only host directory a sandbox sees besides /usr and /etc); runtime.json points
# PYTHONPATH / NODE_PATH there. A stamp file skips the install when nothing changed.
if [ -f functions/python/requirements.txt ] && ! cmp -s functions/python/requirements.txt runtimes/python/packages/.installed; then
  say "installing Python function packages into runtimes/python/packages"
  rm -rf runtimes/python/packages
  /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --target runtimes/python/packages -r functions/python/requirements.txt
  cp functions/python/requirements.txt runtimes/python/packages/.installed
fi
if [ -f functions/nodejs/package.json ] && ! cmp -s functions/nodejs/package.json runtimes/nodejs/packages/.installed; then
  say "installing Node.js function packages into runtimes/nodejs/packages"
  rm -rf runtimes/nodejs/packages && mkdir -p runtimes/nodejs/packages
  cp functions/nodejs/package.json runtimes/nodejs/packages/
  [ -f functions/nodejs/package-lock.json ] && cp functions/nodejs/package-lock.json runtimes/nodejs/packages/
  (cd runtimes/nodejs/packages && if [ -f package-lock.json ]; then npm ci --omit=dev --no-audit --no-fund --silent; else npm install --omit=dev --no-audit --no-fund --silent; fi)
  cp functions/nodejs/package.json runtimes/nodejs/packages/.installed
fi

# ESLint (the `eslint` suite: eslint.config.mjs at the root), pinned in scripts/eslint's lock and
# installed there, not at the root, so the proxy's tests cannot resolve it by accident. A copy of
# the lock in node_modules says whether it is current.
if ! cmp -s scripts/eslint/package-lock.json scripts/eslint/node_modules/.icebox-lock; then
  say "installing ESLint into scripts/eslint"
  (cd scripts/eslint && npm ci --no-audit --no-fund --silent) \
    && cp scripts/eslint/package-lock.json scripts/eslint/node_modules/.icebox-lock \
    || say "warning: ESLint did not install; the eslint suite will fail"
fi

# Node.js reclaim addon (Desiccant): LowMemoryNotification + malloc_trim, built against the
# headers of the installed node. The proxy works without it (reclaim falls back to a gc()).
runtimes/nodejs/addon/build.sh || say "warning: the Node.js reclaim addon did not build; Node reclaim falls back to gc()"

# Isolate mode's v8 engine (docs/isolates.md): isolated-vm, compiled by node-gyp against the
# headers of the installed node (its prebuilt binaries cannot be downloaded here), with the
# versions pinned in runtimes/nodejs/isolates/package-lock.json. Stamps skip the ~2 min build
# unless the lock or node's version changed.
isolates=runtimes/nodejs/isolates
node_bin=$(readlink -f "$(command -v node)")
node_version=$("$node_bin" -p process.version)
if [ ! -f "$isolates/node_modules/isolated-vm/out/isolated_vm.node" ] \
    || ! cmp -s "$isolates/package-lock.json" "$isolates/node_modules/.icebox-lock" \
    || [ "$(cat "$isolates/node_modules/.icebox-node" 2>/dev/null)" != "$node_version" ]; then
  say "building isolated-vm into $isolates (node-gyp, about 2 min)"
  (cd "$isolates" && npm_config_nodedir="$(dirname "$(dirname "$node_bin")")" npm_config_build_from_source=true \
    npm ci --omit=dev --no-audit --no-fund --silent) \
    || { say "isolated-vm did not build: isolate mode's v8 engine needs it (a C++ compiler, python3, node's headers)"; exit 1; }
  # An npm that skips install scripts would leave the package without its binary.
  [ -f "$isolates/node_modules/isolated-vm/out/isolated_vm.node" ] \
    || { say "npm installed isolated-vm without building it (install scripts skipped?)"; exit 1; }
  cp "$isolates/package-lock.json" "$isolates/node_modules/.icebox-lock"
  echo "$node_version" >"$isolates/node_modules/.icebox-node"
fi

# The runtime directory is read-only inside sandboxes: precompile the Python proxy there.
/usr/bin/python3 -m compileall -q runtimes/python >/dev/null

[ "$(id -u)" -eq 0 ] && { scripts/criu/build.sh || say "warning: CRIU did not build; process snapshots are off"; }

# Java proxy and Java examples (Maven downloads its plugins and Gson on first use).
if [ ! -f runtimes/java/target/icebox-java-proxy.jar ] || [ -n "$(find runtimes/java/src runtimes/java/pom.xml -newer runtimes/java/target/icebox-java-proxy.jar 2>/dev/null | head -1)" ]; then
  say "building the Java proxy"
  mvn -B -q -f runtimes/java/pom.xml -DskipTests package
fi
if [ -x runtimes/java/build-cds.sh ]; then
  runtimes/java/build-cds.sh
fi
if [ ! -f functions/java/target/icebox-functions.jar ] || [ -n "$(find functions/java/src functions/java/pom.xml -newer functions/java/target/icebox-functions.jar 2>/dev/null | head -1)" ]; then
  say "building the Java benchmark functions"
  mvn -B -q -f functions/java/pom.xml -DskipTests package
fi
if [ ! -f examples/java/target/icebox-examples.jar ] || [ -n "$(find examples/java/src examples/java/pom.xml -newer examples/java/target/icebox-examples.jar 2>/dev/null | head -1)" ]; then
  say "building the Java examples"
  mvn -B -q -f examples/java/pom.xml -DskipTests package
fi

scripts/guest/build.sh  # the microVM guest image (docs/vm.md) into .tools/guest
# The real OpenWhisk npm client, for the compatibility test.
if [ -f tests/integration/openwhisk-client/package.json ] && [ ! -d tests/integration/openwhisk-client/node_modules ]; then
  say "npm ci (openwhisk client)"
  (cd tests/integration/openwhisk-client && npm ci --silent --no-audit --no-fund)
fi
say "ready"
