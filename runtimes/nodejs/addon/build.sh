#!/usr/bin/env bash
# Builds build/icebox_reclaim.node, the native half of the Node.js proxy's /icebox/reclaim,
# against the headers shipped with the node that runs the proxy (/usr/bin/node, as in
# ../runtime.json; NODE=... overrides). The addon calls V8's C++ API, whose ABI changes with
# every node release, so it is rebuilt whenever that node's version or the source changes; an
# up-to-date build only costs the version check. Needs a C++17 compiler (CXX, default g++).
# Without the addon the proxy still works: reclaim falls back to a plain full GC.
set -euo pipefail
cd "$(dirname "$0")"

NODE=${NODE:-/usr/bin/node}
[ -x "$NODE" ] || NODE=$(command -v node) || { echo "build.sh: no node found" >&2; exit 1; }
CXX=${CXX:-g++}

version=$("$NODE" -p process.version)
out=build/icebox_reclaim.node
stamp=build/node-version
if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ] \
    && [ "$out" -nt icebox_reclaim.cc ] && [ "$out" -nt build.sh ]; then
  exit 0
fi

# The headers live in <prefix>/include/node next to <prefix>/bin/node (Debian and NodeSource
# packages, official tarballs); process.config's node_prefix is not reliable ("/" for the
# NodeSource build), so the prefix is taken from where the binary really is.
prefix=$(dirname "$(dirname "$(readlink -f "$NODE")")")
include="$prefix/include/node"
if [ ! -f "$include/node_api.h" ] || [ ! -f "$include/v8.h" ]; then
  echo "build.sh: no node headers (node_api.h, v8.h) in $include" >&2
  exit 1
fi

mkdir -p build
# Built under a temporary name and moved into place only once node has loaded it, so that a
# proxy starting meanwhile never sees a half-written or unloadable file. -isystem: V8's headers
# are not -Wextra clean. Symbols are resolved against the node binary at load time.
tmp="build/tmp-$$-icebox_reclaim.node"
trap 'rm -f "$tmp"' EXIT
"$CXX" -std=c++17 -O2 -fPIC -shared -Wall -Wextra -isystem "$include" -o "$tmp" icebox_reclaim.cc
"$NODE" -e '
  const addon = require(process.argv[1]);
  for (const name of ["lowMemoryNotification", "memoryPressureCritical", "mallocTrim"]) {
    if (typeof addon[name] !== "function") throw new Error(`the addon does not export ${name}`);
  }' "$(pwd)/$tmp"
mv -f "$tmp" "$out"
echo "$version" > "$stamp"
echo "built runtimes/nodejs/addon/$out for node $version"
