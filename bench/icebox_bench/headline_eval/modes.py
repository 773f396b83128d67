"""The modes of the headline run: the daemon flags of each, from the scaled trace times.

Every mode is a fresh iceboxd with the same `--pool-memory`, `--max-instances` and (trace-
scaled) `--keep-alive`. `icebox-core` is icebox-default with its default techniques off
(no Desiccant, no stem cells): freezing and USS charging only. Each technique alone is
icebox-core plus that one technique, so the ablation shows what each adds by itself; the
offload modes also get the offload pool (`zram:SIZE+swapfile:PATH:SIZE`, created and removed
by the daemon). `auto` is run only by a daemon whose --help lists `--techniques`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

OPENWHISK = "openwhisk"
DEFAULT = "icebox-default"
CORE = "icebox-core"
AUTO = "auto"
# The single techniques, each alone on icebox-core.
TECHNIQUES = ("desiccant", "faasmem", "snapshots", "stemcells", "hybrid")
ALL = (OPENWHISK, DEFAULT, CORE, *TECHNIQUES, AUTO)
# The modes whose daemon gets the offload pool.
OFFLOADING = ("faasmem", AUTO)
# What turns icebox-default's default techniques off.
_CORE_OFF = ["--reclaim-mode", "vanilla", "--library-pageout", "off", "--prewarm", "none"]
_DEFAULT_PREWARM = "python:3=1,nodejs:20=1,java:17=1"


@dataclass(frozen=True)
class Scaled:
    """Trace-time settings as replay milliseconds (workload.scaled_ms)."""

    keep_alive_ms: int
    hybrid_bin_ms: int
    semiwarm_start_ms: int


@dataclass
class Mode:
    name: str
    args: list[str]
    # Annotations added to the actions of these runtimes (language -> [{key, value}]).
    annotations: dict[str, list[dict]] = field(default_factory=dict)
    offload_pool: bool = False


def has_flag(help_text: str, flag: str) -> bool:
    """Whether `iceboxd --help` defines the option `flag` (an option line, not a mention)."""
    return re.search(rf"^\s*(-\w, )?{re.escape(flag)}(\s|=|<|$)", help_text, re.MULTILINE) is not None


def mode(name: str, scaled: Scaled, common: list[str]) -> Mode:
    """The mode `name`; `common` are the flags every mode gets (budget, instance limit)."""
    ka = ["--keep-alive", f"{scaled.keep_alive_ms}ms"]
    base = [*common, *ka]
    if name == OPENWHISK:
        # OpenWhisk's invoker: a container is charged its declared memory, kept for the
        # keep-alive, never reclaimed, offloaded, snapshotted or pre-started; the pause grace
        # equals the keep-alive, so no idle instance is ever frozen (freezing earns nothing).
        return Mode(
            name,
            [
                *base,
                "--pool-charge",
                "limit",
                "--reclaim-mode",
                "vanilla",
                "--library-pageout",
                "off",
                "--offload",
                "none",
                "--snapshots",
                "off",
                "--prewarm",
                "none",
                "--pause-grace",
                f"{scaled.keep_alive_ms}ms",
            ],
        )
    if name == DEFAULT:
        return Mode(name, base)
    if name == CORE:
        return Mode(name, [*base, *_CORE_OFF])
    if name == "desiccant":
        return Mode(name, [*base, "--prewarm", "none"])
    if name == "stemcells":
        return Mode(
            name, [*base, "--reclaim-mode", "vanilla", "--library-pageout", "off", "--prewarm", _DEFAULT_PREWARM]
        )
    if name == "faasmem":
        return Mode(
            name,
            [*base, *_CORE_OFF, "--offload", "faasmem", "--semiwarm-start", f"{scaled.semiwarm_start_ms}ms"],
            offload_pool=True,
        )
    if name == "snapshots":
        # Process snapshots for the runtime whose start and /init are slow (the JVM).
        return Mode(
            name,
            [*base, *_CORE_OFF, "--snapshots", "on"],
            annotations={"java": [{"key": "icebox.snapshot", "value": True}]},
        )
    if name == "hybrid":
        return Mode(
            name,
            [*base, *_CORE_OFF, "--keep-alive-policy", "hybrid", "--hybrid-bin", f"{scaled.hybrid_bin_ms}ms"],
        )
    if name == AUTO:
        # Everything available, chosen per action by the daemon: the pool so offloading can
        # be chosen, the hybrid keep-alive (its fallback is the fixed keep-alive).
        return Mode(
            name,
            [
                *base,
                "--techniques",
                "auto",
                "--keep-alive-policy",
                "hybrid",
                "--hybrid-bin",
                f"{scaled.hybrid_bin_ms}ms",
                "--semiwarm-start",
                f"{scaled.semiwarm_start_ms}ms",
            ],
            offload_pool=True,
        )
    raise ValueError(f"unknown mode {name!r} (expected {', '.join(ALL)})")


def mode_list(text: str, help_text: str, log=print) -> list[str]:
    """The modes asked for (`all` or a comma list), in ALL's order; auto only when the daemon
    has --techniques (else skipped with a note)."""
    names = list(ALL) if text.strip() == "all" else [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in ALL]
    if unknown or not names:
        raise ValueError(f"unknown mode {unknown or text!r} (expected all or some of {', '.join(ALL)})")
    if AUTO in names and not has_flag(help_text, "--techniques"):
        log("note: this iceboxd has no --techniques (iceboxd --help): the auto mode is skipped")
        names.remove(AUTO)
    return [m for m in ALL if m in names]
