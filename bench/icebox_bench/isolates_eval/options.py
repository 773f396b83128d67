"""Option values shared by the isolates recipes and `profile --sim`."""

from __future__ import annotations

from .fit import MODES


def int_list(text) -> list[int]:
    """ "1,2,4" → [1, 2, 4] (sorted, distinct, each ≥ 1)."""
    items = [int(x) for x in str(text).split(",") if x.strip()]
    if not items or any(n < 1 for n in items):
        raise ValueError(f"invalid list of levels {text!r}")
    return sorted(set(items))


def mode_list(text) -> list[str]:
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items or any(m not in MODES for m in items):
        raise ValueError(f"invalid modes {text!r}: choose from {', '.join(MODES)}")
    return items


def isolate_settings(s: dict) -> dict:
    """The isolate-mode annotations from recipe settings (0, "" or absent: the daemon's default)."""
    out = {k: (int(s[f"isolate_{k}"]) if s.get(f"isolate_{k}") else None) for k in ("memory_mb", "pool", "idle_ms")}
    out["engine"] = str(s["isolate_engine"]) if s.get("isolate_engine") else None
    return out
