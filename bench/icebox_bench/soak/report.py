"""The soak's result (soak.json) as markdown tables."""

from __future__ import annotations

from ..units import MIB


def _ms(v) -> str:
    return "–" if v is None else f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def _mib(v) -> str:
    return "–" if v is None else f"{v / MIB:.1f} MiB"


def _n(v) -> str:
    return "–" if v is None else str(v)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _counters(c: dict) -> str:
    if not c:
        return "–"
    starts = ", ".join(f"{k} {v}" for k, v in c["invocations_by_start"].items()) or "none"
    evictions = ", ".join(f"{k} {v}" for k, v in c["evictions_by_reason"].items()) or "none"
    return f"invocations by start: {starts}; evictions by reason: {evictions}; 429 rejections: {c['rejected']}"


def render(result: dict, verdict: bool) -> str:
    c = result["config"]
    cat = result["by_category"]
    lat, ok_lat = result["latency_ms"], result["ok_latency_ms"]
    kills = result["kills"]
    rss, fds = result["daemon_rss_bytes"], result["daemon_fds"]
    after = result["after_stop"]
    states = ", ".join(f"{s} {n}" for s, n in kills["by_state"].items()) or "none"
    skipped = ", ".join(f"{why} {n}" for why, n in kills["skipped"].items()) or "none"
    left = []
    if after["leaked_pids"]:
        left.append(f"instance processes alive after the daemon exited: {after['leaked_pids']}")
    if after["leftover_processes"]:
        left.append(f"processes tied to the state dir: {[p['pid'] for p in after['leftover_processes']]}")
    if after["cgroup_dirs_left"]:
        left.append(f"cgroup dirs: {after['cgroup_dirs_left']}")
    cgroups = (
        "its `icebox-"
        + after["cgroup_tag"]
        + "` cgroup dirs "
        + ("(seen during the run) " if after["cgroup_dirs_seen_during_run"] else "(none during the run) ")
        + ("remain" if after["cgroup_dirs_left"] else "are gone")
    )
    rows = [
        ("Started (UTC)", result["started_utc"]),
        ("Clients / duration / kill interval", f"{c['clients']} / {c['duration_s']:g} s / ~{c['kill_interval_s']:g} s"),
        ("Daemon", f"default flags; isolation {result['daemon']['isolation']}, cgroup {result['daemon']['cgroup']}"),
        ("Requests (blocking invokes)", f"{result['requests']} in {result['load_seconds']:.1f} s"),
        ("Throughput", f"{result['throughput_rps']} req/s"),
        ("Succeeded (200, success)", str(cat["ok"])),
        ("Failed because the soak killed their instance (502, action developer error)", str(cat["instance killed"])),
        (
            "**Daemon failures** (5xx other than the action's 502, connection errors, timeouts)",
            f"**{cat['daemon failure']}**",
        ),
        (
            "Other answers (429, 202, application errors, developer errors of instances the soak did not kill)",
            str(cat["other"]),
        ),
        ("Latency p50 / p99 / max, all requests", f"{_ms(lat['p50'])} / {_ms(lat['p99'])} / {_ms(lat['max'])}"),
        ("Latency p50 / p99, successful requests", f"{_ms(ok_lat['p50'])} / {_ms(ok_lat['p99'])}"),
        (
            "Instance processes SIGKILLed",
            f"{kills['total']} (instance state when listed: {states}; not done: {skipped})",
        ),
        ("Daemon VmRSS before / after / peak", f"{_mib(rss['before'])} / {_mib(rss['after'])} / {_mib(rss['peak'])}"),
        ("Daemon open fds before / after / peak", f"{_n(fds['before'])} / {_n(fds['after'])} / {_n(fds['peak'])}"),
        ("Instances after the load (2 s later)", _n(result["instances_after_load"])),
        ("The daemon's counters over the load (/metrics)", _counters(result.get("daemon_counters") or {})),
        ("Daemon stop on SIGTERM", "–" if after["stop_seconds"] is None else f"{after['stop_seconds'] * 1000:.0f} ms"),
        (
            "Left behind after the daemon stopped",
            ("; ".join(left) if left else "nothing: ")
            + f"{after['instance_processes_checked']} instance processes checked, "
            + cgroups,
        ),
        ("Verdict", "passed" if verdict else "**FAILED**"),
    ]
    lines = ["| Measure | Value |", "|---|---|", *[f"| {_cell(k)} | {_cell(v)} |" for k, v in rows]]
    if result.get("error"):
        lines.append(f"| Error | {_cell(result['error'])} |")
    if result.get("interrupted"):
        lines.append("| Interrupted | yes: the numbers cover the run up to the interruption |")
    lines += ["", "| Answer | Category | Count | Example messages |", "|---|---|---|---|"]
    for k in result["by_kind"]:
        lines.append(
            f"| {_cell(k['kind'])} | {k['category']} | {k['count']} | {_cell('; '.join(k['examples'])) or '–'} |"
        )
    lines += [
        "",
        "| Action | " + " | ".join(result["by_category"]) + " |",
        "|---" * (1 + len(result["by_category"])) + "|",
    ]
    for action, counts in result["by_action"].items():
        lines.append(f"| {action} | " + " | ".join(str(counts.get(cat_, 0)) for cat_ in result["by_category"]) + " |")
    return "\n".join(lines) + "\n"
