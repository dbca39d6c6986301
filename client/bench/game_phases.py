"""The figures of `tandem bench game`'s phases: frames/s and latency from the games' reports, medians over repeats."""

from __future__ import annotations

import statistics

import numpy as np

TARGET_FRAMES_PER_S = {1: 2000.0, 8: 6000.0}  # games -> frames/s in all, with the learner training (issue 26)


def game_figures(results: list[dict], games: int, seconds: float) -> dict:
    """Frames/s in all and per game, and the client-side latency p50/p99 of every request, from the games' reports."""
    latencies = np.concatenate([np.asarray(r["latencies_ms"]) for r in results])
    frames = sum(r["frames"] for r in results)
    return {
        "games": games,
        "frames_per_s": round(frames / seconds, 1),
        "frames_per_s_per_game": round(frames / seconds / games, 1),
        "latency_p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "latency_p99_ms": round(float(np.percentile(latencies, 99)), 3),
    }


def median_phases(runs: list[list[dict]]) -> list[dict]:
    """Per game count, the median of each figure over the repeats (of each named figure in a nested dict too)."""
    merged = []
    for same_count in zip(*runs):
        row = {"games": same_count[0]["games"]}
        for key, first in same_count[0].items():
            if key == "games":
                continue
            if isinstance(first, dict):
                row[key] = {name: median_of([p[key].get(name) for p in same_count]) for name in first}
            else:
                row[key] = median_of([p[key] for p in same_count])
        merged.append(row)
    return merged


def median_of(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def paired_median(numerators: list[list[dict]], denominators: list[list[dict]], k: int) -> float:
    """The median over repeats of each repeat's frames/s ratio at game count k (a pair shares the machine's load)."""
    return round(
        statistics.median(n[k]["frames_per_s"] / d[k]["frames_per_s"] for n, d in zip(numerators, denominators)), 4
    )
