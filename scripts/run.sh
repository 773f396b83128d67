#!/usr/bin/env bash
# `make run`: iceboxd in the foreground on 127.0.0.1:8740 with its state in ./var, the
# examples deployed. Ctrl-C stops it; the daemon removes every instance, process and cgroup.
set -euo pipefail
cd "$(dirname "$0")/.."
listen="${ICEBOX_LISTEN:-127.0.0.1:8740}"
state="${ICEBOX_STATE_DIR:-./var}"
bin=target/release

"$bin/iceboxd" --listen "$listen" --state-dir "$state" "$@" &
daemon=$!
trap 'kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; exit 0' INT TERM

for _ in $(seq 1 100); do
  curl -fsS "http://$listen/icebox/v1/health" >/dev/null 2>&1 && break
  kill -0 "$daemon" 2>/dev/null || { wait "$daemon"; exit 1; }
  sleep 0.1
done

export ICEBOX_APIHOST="http://$listen" ICEBOX_AUTH="${ICEBOX_AUTH:-$(cat "$state/auth")}"
# update creates the action when it does not exist yet (OpenWhisk overwrite semantics).
deploy() { "$bin/icebox" action update "$@" >/dev/null; echo "  deployed $1"; }
echo "Deploying the examples:"
deploy hello-python examples/python/hello.py
deploy alloc-python examples/python/alloc.py
deploy hello-nodejs examples/nodejs/hello.js
deploy alloc-nodejs examples/nodejs/alloc.js
if [ -f examples/java/target/icebox-examples.jar ]; then
  deploy hello-java examples/java/target/icebox-examples.jar --main Hello
  deploy alloc-java examples/java/target/icebox-examples.jar --main Alloc
fi

cat <<MSG

iceboxd is serving on http://$listen (state in $state). Try, in another shell:

  export ICEBOX_APIHOST=http://$listen ICEBOX_AUTH=\$(cat $state/auth)
  $bin/icebox action invoke hello-python -p name you --result
  $bin/icebox action invoke alloc-nodejs -p mb 32 --result
  $bin/icebox instances
  $bin/icebox memory

or with curl:

  curl -u "\$ICEBOX_AUTH" -X POST -H 'Content-Type: application/json' -d '{"name":"curl"}' \\
    "http://$listen/api/v1/namespaces/_/actions/hello-python?blocking=true&result=true"

Ctrl-C stops iceboxd and removes every instance.
MSG
wait "$daemon"
