#!/usr/bin/env bash
# Builds CRIU 4.1.1 (Debian's source tarball, checked by sha256) with icebox's patches into
# .tools/criu/criu of this repository. Debian 12's own CRIU (3.17) fails on current kernels.
# Idempotent: a stamp records what was built; a second run only checks it.
#
# Environment: CRIU_TARBALL=path uses a local copy of the tarball instead of downloading it.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=4.1.1
sha256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
url="http://deb.debian.org/debian/pool/main/c/criu/criu_${version}.orig.tar.xz"
# criu keeps its kernel-feature cache (criu.kdat) in RUNDIR only when RUNDIR is a tmpfs, so it
# is gone after a reboot. /run is not a tmpfs on every host; /dev/shm is. The directory must be
# root's own (0700): icebox_snap::Criu creates and checks it before running criu, because a
# cache planted by another user would mislead criu about the kernel.
rundir=/dev/shm/icebox-criu
out=.tools/criu
patches=(scripts/criu/*.patch)

say() { printf '\033[1m[criu]\033[0m %s\n' "$*"; }

stamp_text() {
  echo "criu $version rundir=$rundir"
  sha256sum "${patches[@]}" "$0"
}

if [ -x "$out/criu" ] && [ -f "$out/stamp" ] && [ "$(stamp_text)" = "$(cat "$out/stamp")" ]; then
  exit 0
fi

deps=(libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libcap-dev libnl-3-dev libnet1-dev
      libbsd-dev libgnutls28-dev pkg-config uuid-dev python3-protobuf iptables build-essential xz-utils
      patch curl)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing build dependencies (${missing[*]}); run as root or install them"
    exit 1
  fi
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$out"
tarball="$out/criu_${version}.orig.tar.xz"
if [ -n "${CRIU_TARBALL:-}" ]; then
  cp "$CRIU_TARBALL" "$tarball.part" && mv "$tarball.part" "$tarball"
elif [ ! -f "$tarball" ]; then
  say "downloading $url"
  curl -fsSL --retry 3 -o "$tarball.part" "$url" && mv "$tarball.part" "$tarball"
fi
if ! echo "$sha256  $tarball" | sha256sum -c --quiet -; then
  rm -f "$tarball"
  say "checksum mismatch for the CRIU tarball; removed it"
  exit 1
fi

src="$out/src"
rm -rf "$src"
mkdir -p "$src"
tar -xJf "$tarball" -C "$src" --strip-components=1
for p in "${patches[@]}"; do
  say "applying $(basename "$p")"
  patch -d "$src" -p1 --quiet --forward < "$p"
done
say "building criu $version (make criu)"
make -C "$src" -j"$(nproc)" criu RUNDIR="$rundir" >"$out/build.log" 2>&1 || {
  tail -30 "$out/build.log"
  say "build failed; full log in $out/build.log"
  exit 1
}
install -m 0755 "$src/criu/criu" "$out/criu.new"
mv "$out/criu.new" "$out/criu"
rm -rf "$src"
stamp_text > "$out/stamp"
say "built $out/criu ($("$out/criu" --version | head -1))"
