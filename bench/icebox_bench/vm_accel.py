"""Which accelerator iceboxd's `--vm-accel auto` settles on, as the experiments report it: KVM
when /dev/kvm is backed by kvm_intel or kvm_amd (the daemon still probes it boots a guest), else
TCG. Recipes note TCG results as ratios only (docs/vm.md)."""

from __future__ import annotations

from pathlib import Path


def detect(sys_module: Path = Path("/sys/module")) -> str:
    if Path("/dev/kvm").exists() and any((sys_module / m).exists() for m in ("kvm_intel", "kvm_amd")):
        return "kvm"
    return "tcg"


def resolve(setting: str | None) -> str:
    """The recipe's `accel` setting, with `auto` (or nothing) detected."""
    return detect() if setting in (None, "", "auto") else str(setting)
