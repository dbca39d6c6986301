"""The lines `tandem status` prints under its tables: the evaluator's CPU, each self-play policy, each learner's time
split, each replica's group, each action server."""

from __future__ import annotations

from tandem.client.screen import fmt, whole


def learner_label(policy_line: dict) -> str:
    """A policy line's learner as status names it: `default`, or `default@1` for a replica."""
    return str(policy_line.get("learner") or policy_line["policy"]).removeprefix("learner-")


def learner_time_lines(data: dict) -> list[str]:
    """A line per learner: where its loop spent the last second, the largest share first (the one that bounds it)."""
    lines = []
    for p in data["policies"]:
        split = p.get("time_split")
        if not split:
            continue
        shares = ", ".join(f"{part} {100 * share:.0f}%" for part, share in sorted(split.items(), key=lambda kv: -kv[1]))
        name = learner_label(p)
        lines.append(f"learner {name} time: {shares}")
    return lines


def replica_group_lines(data: dict) -> list[str]:
    """A line per data-parallel replica: its group's generation and members, and what losing members cost it."""
    lines = []
    for p in data["policies"]:
        group = p.get("group")
        if not group:
            continue
        name = learner_label(p)
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


def evaluator_lines(data: dict) -> list[str]:
    """What the evaluator costs: the cores it used on average, what it may use, its rounds and pauses."""
    lines = []
    for row in data["processes"]:
        c = row.get("counters") or {}
        if row["role"] != "evaluator" or "eval_cpu_cores" not in c:
            continue
        lines.append(
            f"evaluator: {c['eval_cpu_cores']:.2f} cores on average (eval.max_cpu_share allows "
            f"{c.get('eval_cores_allowed', 0):.2f}), rounds of {c.get('eval_round_s', 0):.1f} s, each "
            f"followed by {c.get('eval_wait_s', 0):.1f} s of pause, {whole(c.get('eval_rounds'))} rounds"
        )
    return lines


def selfplay_lines(data: dict) -> list[str]:
    """A line per self-play policy: its rating, its recent score against its pool, the pool's size."""
    return [
        f"self-play {p['policy']}: rating {fmt(p.get('rating'))}, score against its pool "
        f"{fmt(p.get('pool_win_rate'))} (a draw counts half), {fmt(p.get('pool_size'))} versions pooled"
        for p in data["policies"]
        if p.get("rating") is not None
    ]
