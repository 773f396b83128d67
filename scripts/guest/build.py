#!/usr/bin/env python3
"""Builds the guest image of icebox's microVMs (docs/vm.md) from host files:

  vmlinuz            Debian's guest kernel (the current linux-image-6.1.0-*-amd64)
  vmlinux            the same kernel decompressed (ELF): QEMU boots it directly through its
                     PVH entry, skipping the firmware's load and the in-guest decompression
                     (seconds under TCG)
  initramfs.cpio.gz  busybox-static, the virtio/erofs modules and an /init that mounts the root
  rootfs.erofs       read-only root: python3.11, node, the JDK runtime, numactl/memhog, tini,
                     the action proxies at /opt/icebox/runtimes/<lang>, the guest agent
  manifest.json      kernel version, the inputs' fingerprint and the outputs' sha256

Idempotent: the inputs' fingerprint (path, size and mtime of every input file, this script,
the agent binary, the kernel package) is kept in manifest.json; a second run with the same
inputs only checks it.

Usage: build.py --out DIR --agent PATH [--repo ROOT] [--force]
"""

import argparse
import gzip
import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time

# Drivers the guest loads from the initramfs, in this order; their dependencies are found from
# each module's .modinfo. crc32c_generic is erofs' (libcrc32c's) soft dependency: the crypto
# API finds it by name, so no symbol names it.
MODULES = ["crc32c_generic", "virtio_pci", "virtio_blk", "virtio_console", "virtio_mem", "virtio_balloon", "erofs"]

JVM = "/usr/lib/jvm/java-17-openjdk-amd64"
# Parts of the JDK a headless runtime never reads: 75 MB of jmods, sources, headers, manuals.
JVM_SKIP = {"jmods", "include", "man", "docs", "demo", "lib/src.zip", "lib/ct.sym"}
PY_STDLIB = "/usr/lib/python3.11"
PY_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3/tests", "ensurepip", "config-3.11-x86_64-linux-gnu"}
HOST_FILES = ["/usr/bin/python3.11", "/usr/bin/node", "/usr/bin/numactl", "/usr/bin/memhog", "/usr/bin/tini"]
RUNTIMES = ["python", "nodejs", "java"]
# Inside a runtime directory: what only the host's tests and tools use.
RUNTIME_SKIP = {"tests", "test", "tools", "src", "cds", "node_modules/.cache"}
AGENT_PATH = "/sbin/icebox-guest-agent"

INIT = r"""#!/bin/busybox sh
# Guest init (initramfs): load the drivers, mount the read-only root image, hand PID 1 to the
# agent. Any failure ends this script, which panics the kernel: QEMU (-no-reboot) exits and
# the host sees it, with the reason on the serial console.
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
for m in $(/bin/busybox cat /modules.order); do
  /bin/busybox insmod "/modules/$m" || echo "init: insmod $m failed"
done
if /bin/busybox grep -q icebox.probe /proc/cmdline; then
  echo ICEBOX-PROBE-OK > /dev/ttyS0
  /bin/busybox poweroff -f
fi
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do /bin/busybox usleep 10000; i=$((i+1)); done
/bin/busybox mount -t erofs -o ro /dev/vda /newroot || { echo "init: cannot mount /dev/vda"; exit 1; }
/bin/busybox mount --move /dev /newroot/dev
/bin/busybox umount /sys
/bin/busybox umount /proc
exec /bin/busybox switch_root /newroot AGENT
""".replace("AGENT", AGENT_PATH)


def log(msg):
    print(f"[guest] {msg}", flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


# ---- kernel ---------------------------------------------------------------------------------


def kernel_package():
    out = run(["apt-cache", "depends", "linux-image-amd64"])
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[1]
    raise SystemExit("build.py: cannot resolve linux-image-amd64 (run apt-get update)")


def fetch_kernel(cache):
    os.makedirs(cache, exist_ok=True)
    try:
        pkg = kernel_package()
    except (subprocess.CalledProcessError, SystemExit):
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        pkg = kernel_package()
    debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
    if not debs:
        log(f"apt-get download {pkg}")
        subprocess.run(
            ["apt-get", "download", "-q", pkg],
            cwd=cache,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
    deb = os.path.join(cache, sorted(debs)[-1])
    release = pkg[len("linux-image-") :]
    return deb, release


def modinfo_depends(path):
    """The `depends=` entry of a module's .modinfo ELF section."""
    with open(path, "rb") as f:
        data = f.read()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        off = shoff + i * shentsize
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, off)
        return name, offset, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name : end] == b".modinfo":
            for entry in data[offset : offset + size].split(b"\0"):
                if entry.startswith(b"depends="):
                    return [d for d in entry[8:].decode().split(",") if d]
    return []


def module_order(moddir):
    by_name = {}
    for root, _, files in os.walk(moddir):
        for f in files:
            if f.endswith(".ko"):
                by_name[f[:-3].replace("-", "_")] = os.path.join(root, f)
    order = []

    def visit(name):
        name = name.replace("-", "_")
        path = by_name.get(name)
        if path is None:
            return  # built into the kernel
        if path in order:
            return
        for dep in modinfo_depends(path):
            visit(dep)
        order.append(path)

    for m in MODULES:
        if m not in by_name:
            raise SystemExit(f"build.py: module {m} not found in the kernel package")
        visit(m)
    return order


def write_cpio(root, out):
    """newc cpio of `root`, gzip-compressed (no cpio tool needed)."""
    ino = [1]

    def entry(f, name, mode, data=b"", nlink=1):
        header = "070701" + "".join(
            f"{v:08X}" for v in [ino[0], mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
        )
        ino[0] += 1
        f.write(header.encode() + name.encode() + b"\0")
        f.write(b"\0" * ((4 - (110 + len(name) + 1) % 4) % 4))
        f.write(data)
        f.write(b"\0" * ((4 - len(data) % 4) % 4))

    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as f:
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                entry(f, rel, stat.S_IFDIR | 0o755, nlink=2)
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                relp = os.path.normpath(os.path.join(rel, name))
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    entry(f, relp, stat.S_IFLNK | 0o777, os.readlink(path).encode())
                else:
                    with open(path, "rb") as fh:
                        entry(f, relp, stat.S_IFREG | (st.st_mode & 0o777), fh.read())
        entry(f, "TRAILER!!!", 0)


def extract_vmlinux(vmlinuz, out):
    """The ELF kernel inside a bzImage (Debian compresses it with xz)."""
    import lzma

    data = open(vmlinuz, "rb").read()
    start = data.find(b"\xfd7zXZ\x00")
    if start < 0:
        raise SystemExit("build.py: the kernel is not xz-compressed; cannot extract vmlinux")
    elf = lzma.LZMADecompressor().decompress(data[start:])
    if not elf.startswith(b"\x7fELF"):
        raise SystemExit("build.py: the decompressed kernel is not an ELF file")
    with open(out, "wb") as f:
        f.write(elf)


def build_initramfs(deb, release, work, out):
    kdir = os.path.join(work, "kernel")
    shutil.rmtree(kdir, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", deb, kdir], check=True)
    shutil.copyfile(os.path.join(kdir, "boot", f"vmlinuz-{release}"), os.path.join(out, "vmlinuz.tmp"))
    extract_vmlinux(os.path.join(out, "vmlinuz.tmp"), os.path.join(out, "vmlinux.tmp"))
    order = module_order(os.path.join(kdir, "lib", "modules", release))

    ird = os.path.join(work, "initramfs")
    shutil.rmtree(ird, ignore_errors=True)
    os.makedirs(os.path.join(ird, "bin"))
    os.makedirs(os.path.join(ird, "modules"))
    shutil.copy2("/bin/busybox", os.path.join(ird, "bin", "busybox"))
    os.symlink("busybox", os.path.join(ird, "bin", "sh"))
    names = []
    for path in order:
        name = os.path.basename(path)
        shutil.copyfile(path, os.path.join(ird, "modules", name))
        names.append(name)
    with open(os.path.join(ird, "modules.order"), "w") as f:
        f.write("\n".join(names) + "\n")
    with open(os.path.join(ird, "init"), "w") as f:
        f.write(INIT)
    os.chmod(os.path.join(ird, "init"), 0o755)
    write_cpio(ird, os.path.join(out, "initramfs.cpio.gz.tmp"))
    shutil.rmtree(kdir)
    shutil.rmtree(ird)
    return names


# ---- root filesystem ------------------------------------------------------------------------


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


class Rootfs:
    def __init__(self, root):
        self.root = root
        self.sources = []  # host files read, for the fingerprint

    def dest(self, guest_path):
        return os.path.join(self.root, guest_path.lstrip("/"))

    def copy_file(self, src, guest_path):
        """Copy one host file (following symlinks) to guest_path."""
        dst = self.dest(guest_path)
        if os.path.lexists(dst):
            return
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=True)
        self.sources.append(src)

    def symlink(self, target, guest_path):
        dst = self.dest(guest_path)
        if os.path.lexists(dst):
            return
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.symlink(target, dst)

    def copy_path(self, guest_path):
        """A host path at the same place in the guest, with every symlink on the way (a
        library's soname link and its file, usrmerge's /lib -> usr/lib)."""
        path = os.path.normpath(guest_path)
        # Resolve parent directories (e.g. /lib -> /usr/lib) so the copy lands in /usr.
        parent = os.path.realpath(os.path.dirname(path))
        path = os.path.join(parent, os.path.basename(path))
        while os.path.islink(path):
            target = os.readlink(path)
            self.symlink(target, path)
            path = os.path.normpath(os.path.join(os.path.dirname(path), target))
            path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        self.copy_file(path, path)

    def copy_tree(self, src, guest_path, skip=()):
        for dirpath, dirs, files in os.walk(src, followlinks=False):
            rel = os.path.relpath(dirpath, src)
            keep = []
            for d in sorted(dirs):
                relp = os.path.normpath(os.path.join(rel, d))
                if relp in skip:
                    continue
                host = os.path.join(dirpath, d)
                if os.path.islink(host):
                    self.symlink(os.readlink(host), os.path.join(guest_path, relp))
                else:
                    keep.append(d)
            dirs[:] = keep
            for name in sorted(files):
                relp = os.path.normpath(os.path.join(rel, name))
                if relp in skip:
                    continue
                host = os.path.join(dirpath, name)
                if os.path.islink(host) and not os.path.exists(host):
                    continue  # dangling (e.g. a JDK link to sources not installed)
                self.copy_file(host, os.path.join(guest_path, relp))

    def elf_files(self):
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                p = os.path.join(dirpath, name)
                if not os.path.islink(p) and is_elf(p):
                    yield p

    def add_library_closure(self):
        """Every shared library the ELF files in the tree need, as ldd resolves them on the
        host (libraries a package bundles next to itself resolve inside the tree)."""
        missing = set()
        done = set()
        while True:
            added = False
            for path in list(self.elf_files()):
                if path in done:
                    continue
                done.add(path)
                res = subprocess.run(["ldd", path], capture_output=True, text=True)
                for line in res.stdout.splitlines():
                    line = line.strip()
                    if "=> not found" in line:
                        missing.add((os.path.relpath(path, self.root), line.split()[0]))
                        continue
                    parts = line.split()
                    lib = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
                    if not lib.startswith("/"):
                        continue
                    if os.path.realpath(lib).startswith(os.path.realpath(self.root)):
                        continue
                    if not os.path.lexists(self.dest(os.path.realpath(lib))) or not os.path.lexists(self.dest(lib)):
                        self.copy_path(lib)
                        added = True
            if not added:
                break
        return sorted(missing)


def build_rootfs(args, out, work):
    root = os.path.join(work, "rootfs")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    fs = Rootfs(root)
    # usrmerge, as on the host: /bin, /lib, /lib64, /sbin are links into /usr.
    for d in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64"]:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ["bin", "sbin", "lib", "lib64"]:
        os.symlink(f"usr/{link}", os.path.join(root, link))
    for d in ["proc", "sys", "dev", "run", "tmp", "etc", "opt/icebox/runtimes"]:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)

    for f in HOST_FILES:
        fs.copy_path(f)
    fs.symlink("python3.11", "/usr/bin/python3")
    fs.copy_tree(PY_STDLIB, PY_STDLIB, skip=PY_SKIP)
    fs.copy_tree(JVM, JVM, skip=JVM_SKIP)
    fs.symlink(f"{JVM}/bin/java", "/usr/bin/java")
    for name in RUNTIMES:
        src = os.path.join(args.repo, "runtimes", name)
        fs.copy_tree(src, f"/opt/icebox/runtimes/{name}", skip=RUNTIME_SKIP)
    fs.copy_file(args.agent, AGENT_PATH)
    os.chmod(fs.dest(AGENT_PATH), 0o755)
    fs.copy_path("/lib64/ld-linux-x86-64.so.2")
    missing = fs.add_library_closure()

    etc = os.path.join(root, "etc")
    with open(os.path.join(etc, "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    with open(os.path.join(etc, "group"), "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    with open(os.path.join(etc, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n")
    with open(os.path.join(etc, "nsswitch.conf"), "w") as f:
        f.write("passwd: files\ngroup: files\nhosts: files\n")
    with open(os.path.join(etc, "ld.so.conf"), "w") as f:
        f.write("/usr/lib/x86_64-linux-gnu\n/usr/local/lib\n")
    if os.path.exists("/etc/java-17-openjdk"):
        fs.copy_tree("/etc/java-17-openjdk", "/etc/java-17-openjdk")
    subprocess.run(["ldconfig", "-r", root], check=True)

    img = os.path.join(out, "rootfs.erofs.tmp")
    if os.path.exists(img):
        os.remove(img)
    # Fixed timestamps and uuid: the same inputs give the same image.
    subprocess.run(
        ["mkfs.erofs", "--quiet", "--all-root", "-T0", "-U", "6d6f6f6e-6963-6562-6f78-67756573740a", img, root],
        check=True,
    )
    size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs_ in os.walk(root) for f in fs_)
    shutil.rmtree(root)
    return missing, size, fs.sources


# ---- fingerprint and manifest ---------------------------------------------------------------


def stat_fingerprint(paths):
    h = hashlib.sha256()
    for top in paths:
        for dirpath, dirs, files in (
            os.walk(top) if os.path.isdir(top) else [(os.path.dirname(top), [], [os.path.basename(top)])]
        ):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(dirpath, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cache = os.path.join(out, "cache")

    deb, release = fetch_kernel(cache)
    inputs = (
        [os.path.abspath(__file__), args.agent, deb, "/bin/busybox", PY_STDLIB, JVM, "/etc/java-17-openjdk"]
        + HOST_FILES
        + [os.path.join(args.repo, "runtimes", r) for r in RUNTIMES]
    )
    fingerprint = stat_fingerprint(inputs)
    manifest_path = os.path.join(out, "manifest.json")
    outputs = ["vmlinuz", "vmlinux", "initramfs.cpio.gz", "rootfs.erofs"]
    if not args.force and os.path.exists(manifest_path):
        try:
            old = json.load(open(manifest_path))
        except ValueError:
            old = {}
        if old.get("inputs_fingerprint") == fingerprint and all(os.path.exists(os.path.join(out, o)) for o in outputs):
            log(f"up to date ({out})")
            return

    started = time.monotonic()
    work = os.path.join(out, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    log(f"kernel {release}: initramfs")
    modules = build_initramfs(deb, release, work, out)
    log("rootfs (copying host files, library closure, mkfs.erofs)")
    missing, tree_bytes, _ = build_rootfs(args, out, work)
    shutil.rmtree(work)
    for o in outputs:
        os.replace(os.path.join(out, o + ".tmp"), os.path.join(out, o))
    manifest = {
        "format": 1,
        "kernel": {"package": f"linux-image-{release}", "release": release, "deb": os.path.basename(deb)},
        "modules": modules,
        "agent_path": AGENT_PATH,
        "runtimes": {name: f"/opt/icebox/runtimes/{name}" for name in RUNTIMES},
        "rootfs_tree_bytes": tree_bytes,
        "libraries_not_found": [f"{who}: {lib}" for who, lib in missing],
        "inputs_fingerprint": fingerprint,
        "sha256": {o: sha256(os.path.join(out, o)) for o in outputs},
        "bytes": {o: os.path.getsize(os.path.join(out, o)) for o in outputs},
        "build_seconds": round(time.monotonic() - started, 1),
    }
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)
    log(
        f"built {out} in {manifest['build_seconds']} s: "
        + ", ".join(f"{o} {manifest['bytes'][o] >> 20} MiB" for o in outputs)
    )


if __name__ == "__main__":
    sys.exit(main())
