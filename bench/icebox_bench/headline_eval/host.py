"""What the headline run reads from the host besides the daemon's API: the offload tiers'
use (/proc/swaps), the machine's CPU busy share (/proc/stat) and zswap's switch, so a run can
show the node was not CPU-bound and leave swap and zswap as it found them."""

from __future__ import annotations

from pathlib import Path

from ..faasmem_eval.overheads import parse_proc_swaps

ZSWAP_ENABLED = Path("/sys/module/zswap/parameters/enabled")


def read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def tiers(swaps_text: str, zram_device: str | None, swap_file: str | None) -> dict[str, int]:
    """Bytes stored in the pool's zram device and in its swap file (only the daemon's own)."""
    out = {"zram": 0, "file": 0}
    for entry in parse_proc_swaps(swaps_text):
        name = entry["device"].removesuffix("\\040(deleted)")
        if zram_device and name == zram_device:
            out["zram"] += entry["used_bytes"]
        elif swap_file and name == swap_file:
            out["file"] += entry["used_bytes"]
    return out


def ours_left(swaps_text: str, names: set[str]) -> list[str]:
    """Swap areas of this run still on (a daemon that did not remove its pool)."""
    return [e["device"] for e in parse_proc_swaps(swaps_text) if e["device"] in names]


def cpu_times(stat_text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the machine from /proc/stat's `cpu` line (idle = idle+iowait)."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            total = sum(values[:8])
            return total - idle, total
    raise ValueError("/proc/stat has no cpu line")


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    total = after[1] - before[1]
    return None if total <= 0 else round((after[0] - before[0]) / total, 4)


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cpu_weight_files(tag: str, root: Path = CGROUP_ROOT) -> list[tuple[Path, int]]:
    """The daemon's top cgroup's CPU weight file and its scale: cgroup v1 `cpu.shares` (1024 a
    nice-0 task) or v2 `cpu.weight` (100 a nice-0 task), whichever exists."""
    out = []
    v1 = root / "cpu" / f"icebox-{tag}" / "cpu.shares"
    v2 = root / f"icebox-{tag}" / "cpu.weight"
    if v1.exists():
        out.append((v1, 1024))
    if v2.exists():
        out.append((v2, 100))
    return out


def raise_cpu_weight(tag: str, tasks: int, root: Path = CGROUP_ROOT) -> list[str]:
    """Give the daemon's instances together the CPU weight of `tasks` nice-0 tasks (the files
    set). All instances sit in the daemon's one top cgroup, which otherwise weighs as much as a
    single task of the machine's other work."""
    done = []
    for path, unit in cpu_weight_files(tag, root):
        value = min(tasks * unit, 262144 if unit == 1024 else 10000)
        try:
            if path.read_text().strip() != str(value):
                path.write_text(str(value))
            done.append(str(path))
        except OSError:
            continue
    return done
