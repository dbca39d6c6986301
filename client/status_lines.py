"""The lines `tandem status` prints under its tables: each learner's time split, each replica's group, each action
server."""

from __future__ import annotations

from tandem.client.screen import fmt


def learner_time_lines(data: dict) -> list[str]:
    """A line per learner: where its loop spent the last second, the largest share first (the one that bounds it)."""
    lines = []
    for p in data["policies"]:
        split = p.get("time_split")
        if not split:
            continue
        shares = ", ".join(f"{part} {100 * share:.0f}%" for part, share in sorted(split.items(), key=lambda kv: -kv[1]))
        name = str(p.get("learner") or p["policy"]).removeprefix("learner-")
        lines.append(f"learner {name} time: {shares}")
    return lines


def replica_group_lines(data: dict) -> list[str]:
    """A line per data-parallel replica: its group's generation and members, and what losing members cost it."""
    lines = []
    for p in data["policies"]:
        group = p.get("group")
        if not group:
            continue
        name = str(p.get("learner") or p["policy"]).removeprefix("learner-")
        lines.append(
            f"replica {name}: generation {group['generation']}, {group['members']} members, re-formed "
            f"{group['reforms']}x, {group['updates_lost']} updates lost"
        )
    return lines


def game_server_lines(data: dict) -> list[str]:
    """A line per action server (actors.mode = 'serve'): its port, games, requests/s, batch, latency."""
    return [
        f"game server {g['name']}: port {fmt(g['serve_port'])}, {fmt(g['games'])} games ({fmt(g['streams'])} "
        f"streams), {fmt(g['serve_requests_per_s'])} requests/s, mean batch {fmt(g['serve_batch_mean'])}, "
        f"action latency p50 {fmt(g['serve_latency_p50_ms'], ' ms')} p99 {fmt(g['serve_latency_p99_ms'], ' ms')}, "
        f"{fmt(g['games_timed_out'])} timed out, {fmt(g['game_errors'])} refused"
        for g in data.get("game_servers", [])
    ]
