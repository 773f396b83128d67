#!/usr/bin/env bash
# Builds the microVM guest image (docs/vm.md) into .tools/guest (or $1): installs what the
# build and the VMs need on a fresh Debian 12 machine, builds the guest agent, then
# scripts/guest/build.py assembles vmlinuz, initramfs.cpio.gz, rootfs.erofs and manifest.json.
# Idempotent: with unchanged inputs it only checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.tools/guest}

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx switch_root || need+=(busybox-static)
command -v mkfs.erofs >/dev/null || need+=(erofs-utils)
command -v numactl >/dev/null || need+=(numactl)
command -v memhog >/dev/null || need+=(numactl)
[ -x /usr/bin/tini ] || need+=(tini)
command -v dpkg-deb >/dev/null || need+=(dpkg)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "[guest] not root: cannot apt-get install ${need[*]}; the VM backends need them" >&2
    exit 1
  fi
  echo "[guest] apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
"$cargo" build --release -q -p icebox-guest --bin icebox-guest-agent
exec /usr/bin/python3 scripts/guest/build.py --out "$out" --agent target/release/icebox-guest-agent
