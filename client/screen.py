"""Screens that fit 80 columns: short numbers, stop-condition bars, and a narrow status table; values are never cut."""

from __future__ import annotations

from typing import Any

BAR_WIDTH = 20
NARROW_BELOW = 120  # a terminal narrower than this gets the narrow status table


def fmt(value: Any, unit: str = "") -> str:
    """A status value as text: "-" for none, a float shortened (fixed), with its unit."""
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{fixed(value)}{unit}"
    return f"{value}{unit}"


def fixed(value: float, digits: int = 1) -> str:
    """`value` with `digits` decimals, a zero always unsigned: a mean of returns just under zero read '-0.0'."""
    return f"{round(value, digits) + 0.0:.{digits}f}"  # -0.0 + 0.0 is +0.0


def short(value: Any, digits: int = 1) -> str:
    """A number in at most about 7 characters (1234567 -> '1.23M'); '-' for unknown."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    for unit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):  # below 10,000 a number is short enough
        if abs(value) >= unit:
            scaled = value / (1e3 if suffix == "k" else unit)
            return (
                f"{scaled:.2f}{suffix}"
                if abs(scaled) < 10
                else f"{scaled:.1f}{suffix}"
                if abs(scaled) < 100
                else f"{scaled:.0f}{suffix}"
            )
    if isinstance(value, int):
        return str(value)
    return fixed(value, digits)


def whole(value: Any) -> str:
    """An identifier-like number (a weight version) in full; '-' for unknown."""
    return "-" if value is None else str(int(value))


def duration(seconds: Any) -> str:
    """'45s', '12m05s', '27h26m'; '-' for unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A text bar, e.g. '########------------' for 0.4 (ASCII, so any terminal and log shows it)."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "#" * filled + "-" * (width - filled)


def stop_lines(figures: dict, stop: Any) -> list[str]:
    """One line per set [stop] condition: a bar where progress is a fraction, else value / target."""
    if stop is None:
        return []
    current = {
        "eval_return": figures.get("eval_return"),
        "mean_return": figures.get("mean_return_100"),
        "env_steps": figures.get("env_steps"),
        "seconds": figures.get("elapsed_s"),
    }
    lines = []
    for key, value in current.items():
        target = getattr(stop, key, None)
        if target is None:
            continue
        text = f"{short(value)} / {short(target)}"
        # Returns can be negative (Pendulum, Pong): a bar only where 0..target is the way to go.
        shown = bar(value / target) if value is not None and target > 0 and value >= 0 else " " * BAR_WIDTH
        lines.append(f"stop at {key:<12} {shown}  {text}")
    return lines


def progress_lines(figures: dict, stop: Any = None) -> list[str]:
    """What `tandem up` shows on a terminal, each line under 80 columns."""
    f = figures
    lines = [
        f"{short(f['elapsed_s'])} s   version {whole(f['version'])}   lag {short(f['lag_mean'], 2)}   "
        f"dropped {short(f['batches_dropped'])}",
        f"env steps {short(f['env_steps'])} ({short(f['env_steps_per_s'])}/s)   "
        f"updates {short(f['updates'])} ({short(f['updates_per_s'])}/s)",
        f"episodes {short(f['episodes'])}   return100 {short(f['mean_return_100'])}   eval {short(f['eval_return'])}",
    ]
    for policy, pf in f.get("policies", {}).items():
        lines.append(f"  policy {policy}: version {whole(pf.get('version'))}  eval {short(pf.get('eval_return'))}")
    agents = f.get("agent_returns_100") or {}
    lines += [f"  agent {agent}: return100 {short(value)}" for agent, value in agents.items()]
    return lines + stop_lines(figures, stop)


def narrow_status_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    """The status table's columns and rows for a narrow terminal: what matters, each cell whole."""
    columns = ["name", "state", "stage", "up", "rate", "ver", "rss", "restarts"]
    rows = []
    for r in data["processes"]:
        unit = "u" if r["rate_of"] == "updates" else ""
        rows.append(
            [
                r["name"],
                r["state"] + (" HUNG" if r["hung"] else ""),
                r["stage"] or "-",
                duration(r["uptime_s"]),
                f"{short(r['rate_per_s'])}{unit}/s" if r["rate_per_s"] is not None else "-",
                whole(r["version"]),
                short(r["rss_mb"], 0) + "M" if r["rss_mb"] is not None else "-",
                str(r["restarts"]) + (f"+{r['recycles']}p" if r.get("recycles") else ""),
            ]
        )
    return columns, rows
