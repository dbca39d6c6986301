"""A PettingZoo world with 3 agents and 2 policies, as real processes: one learner per policy, one actor."""

from __future__ import annotations

import time

import numpy as np

from tandem.daemons.checkpoints.files import load_latest_checkpoint
from tests.multiagent_envs import INDEX
from tests.system.harness import write_config

MULTI = [
    "env.id='tests.multiagent_envs:turn_aec'",
    "env.num_envs=4",
    "policies.alpha.agents=['a_*']",
    "policies.beta.agents=['b_*']",
    "eval.enabled=false",
    "actors.count=1",
    "actors.unroll_length=4",
    "learner.replay_min_size=200",
    "learner.checkpoint_replay=true",
    "learner.checkpoint_interval_s=1.0",
    "algorithm.batch_size=32",
    "supervisor.heartbeat_interval_s=0.2",
    "actors.weights_refresh_s=0.5",
]
OWN_AGENTS = {"alpha": {INDEX["a_0"], INDEX["a_1"]}, "beta": {INDEX["b_0"]}}


def start_learner(procs, collector, path, policy):
    procs.start(f"learner-{policy}", "learner", str(path), "--policy", policy, "--control", collector.endpoint)


def train_alpha_and_beta(procs, collector, path, updates: int) -> tuple[str, str]:
    """Both policies' learners and actor-0 as processes, until each learner is past `updates`: their names."""
    for policy in ("alpha", "beta"):
        start_learner(procs, collector, path, policy)
    procs.start("actor-0", "actor", str(path), "--index", "0", "--control", collector.endpoint)
    learners = ("learner-alpha", "learner-beta")
    collector.wait_for(
        lambda: all(collector.counter(n, "updates", 0) > updates for n in learners),
        90,
        "both learners training",
        procs,
    )
    return learners


def test_two_policies_train_apart_and_a_dead_learner_stalls_nobody(tmp_path, procs, collector):
    config, path = write_config(tmp_path, MULTI)
    learners = train_alpha_and_beta(procs, collector, path, 50)
    for name in learners:
        assert collector.counter(name, "batches_foreign", 0) == 0
        assert collector.counter(name, "batches_malformed", 0) == 0
        assert collector.counter(name, "batches_stale", 0) == 0

    # Kill alpha's learner: beta keeps training at its rate, and the actor keeps stepping.
    window = 5.0
    before_start = time.monotonic()
    collector.wait_for(lambda: time.monotonic() - before_start >= window, window + 5, "a measuring window", procs)
    beta_before = collector.rate("learner-beta", "updates", before_start)
    beta_in_before = collector.rate("learner-beta", "batches_received", before_start)
    steps_at_kill = collector.counter("actor-0", "env_steps")
    procs.kill("learner-alpha")
    killed_at = time.monotonic()
    collector.wait_for(lambda: time.monotonic() - killed_at >= 1.0, 5, "heartbeats sent after the kill", procs)
    alpha_version = collector.counter("actor-0", "version.alpha")
    collector.wait_for(lambda: time.monotonic() - killed_at >= window, window + 5, "a window without alpha", procs)
    beta_after = collector.rate("learner-beta", "updates", killed_at + 0.5)
    beta_in_after = collector.rate("learner-beta", "batches_received", killed_at + 0.5)
    print(
        f"beta updates/s with alpha alive {beta_before:.0f}, with alpha dead {beta_after:.0f}; "
        f"beta batches/s received {beta_in_before:.0f} then {beta_in_after:.0f}"
    )
    assert beta_after >= 0.5 * beta_before > 0, (beta_before, beta_after)
    # Beta's batches keep arriving. (The actor may drop some of beta's all along, when beta's learner reads
    # slower than the actor makes them on a loaded machine; what matters is that alpha's death changes nothing.)
    assert beta_in_after >= 0.5 * beta_in_before > 0, (beta_in_before, beta_in_after)
    assert collector.counter("actor-0", "env_steps") > steps_at_kill + 1000, "the actor stopped stepping"
    assert collector.counter("actor-0", "batches_dropped.alpha", 0) > 0, "nothing queued up for the dead learner"
    assert collector.counter("actor-0", "version.alpha") == alpha_version, (
        "alpha's version changed with its learner dead"
    )

    start_learner(procs, collector, path, "alpha")
    collector.wait_for(
        lambda: collector.counter("actor-0", "version.alpha") > alpha_version,
        60,
        "the actor following alpha's restarted learner",
        procs,
    )
    codes = procs.stop_all()
    assert all(code == 0 for code in codes.values() if code is not None), codes

    # Each learner's replay holds only its own agents' observations.
    for policy, own in OWN_AGENTS.items():
        state = load_latest_checkpoint(tmp_path / "run" / f"learner-{policy}")
        assert state is not None, f"learner-{policy} wrote no checkpoint"
        obs = state["replay"]["obs"].numpy()
        assert len(obs) > 100
        assert set(np.unique(obs[:, 0]).astype(int)) <= own, (policy, np.unique(obs[:, 0]))


def random_returns(config, episodes: int = 200) -> dict[str, float]:
    """Each agent's mean return under uniformly random actions, stepped the way the actors step."""
    from tandem.daemons.envs.rollout import MultiAgentRollout
    from tandem.daemons.envs.spaces import policy_spaces
    from tandem.daemons.envs.worlds import env_api, make_world

    api = env_api(config.env)
    worlds = [make_world(config.env, api) for _ in range(4)]
    spaces = policy_spaces(config, worlds[0])
    rollout = MultiAgentRollout(worlds, api, spaces, 1, "random", seed=4242, record=False)
    rng = np.random.default_rng(0)
    returns: dict[str, list[float]] = {}
    while rollout.episodes < episodes:
        rollout.tick(lambda p, obs, w: (rng.integers(0, spaces[p].action_space.n, size=len(obs)), {}), {})
        for agent, ret, _ in rollout.new_episodes:
            returns.setdefault(agent, []).append(ret)
        rollout.new_episodes.clear()
    rollout.close()
    return {agent: float(np.mean(values)) for agent, values in returns.items()}


def test_the_speaker_listener_example_learns_above_random(tmp_path):
    import json

    from tandem.daemons.config import load_config
    from tandem.daemons.runtime.exit_codes import ExitCode
    from tests.system.harness import ROOT
    from tests.system.test_up import finish, up

    budget = 150_000  # env steps (agent turns) over the run; about 20 s of acting on a 2-core machine
    proc = up(tmp_path, f"stop.env_steps={budget}", "stop.seconds=600", "run.seed=1", example="speaker_listener.toml")
    out, err = finish(proc, 300)
    assert proc.returncode == ExitCode.OK, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    random = random_returns(load_config(ROOT / "examples" / "speaker_listener.toml"))
    learned = {policy: figures["eval_return"] for policy, figures in summary["policies"].items()}
    print(f"after {summary['env_steps']} env steps: evaluation {learned}, random {random}")
    assert set(learned) == {"speaker", "listener"}
    for policy, agent in (("speaker", "speaker_0"), ("listener", "listener_0")):
        assert learned[policy] is not None, f"no evaluation of {policy} yet"
        # Random play scores about -43 per agent; a margin of 10 is well clear of evaluation noise (~3).
        assert learned[policy] > random[agent] + 10, (policy, learned[policy], random[agent])
    assert set(summary["agent_returns_100"]) == {"speaker_0", "listener_0"}


AGENT_COUNTERS = {"return.a_0", "return.a_1", "return.b_0", "version.alpha", "version.beta"}


def test_status_has_a_line_per_policy(tmp_path):
    import json

    from click.testing import CliRunner

    from tandem.client.cli import cli
    from tests.system.test_supervisor import Run

    run = Run(
        tmp_path,
        [m for m in MULTI if not m.startswith(("learner.checkpoint", "supervisor."))]
        + ["eval.enabled=true", "eval.window_episodes=4", "supervisor.liveness_timeout_s=20"],
    )
    try:
        run.wait(
            lambda d: (
                len(d["processes"]) == 4
                and all(r["state"] == "RUNNING" for r in d["processes"])
                and all((p["updates"] or 0) > 0 and p["eval_return"] is not None for p in d["policies"])
                # The actor reports each agent's return once that agent has ended an episode, which can come
                # after the evaluator's first figures; wait for what is asserted below, not for a race.
                and AGENT_COUNTERS <= set(next(r for r in d["processes"] if r["name"] == "actor-0")["counters"])
            ),
            90,
            "both learners training and evaluated, and every agent's return reported by the actor",
        )
        data = json.loads(
            CliRunner().invoke(cli, ["status", "--endpoint", run.endpoint, "--json", "--timeout", "20"]).output
        )
        lines = {p["policy"]: p for p in data["policies"]}
        assert set(lines) == {"alpha", "beta"}
        for line in lines.values():
            assert line["version"] >= 0 and line["replay_fill"] > 0 and line["dropped_by_actors"] is not None, data
        actor = next(r for r in data["processes"] if r["name"] == "actor-0")
        assert AGENT_COUNTERS <= set(actor["counters"])
        table = CliRunner().invoke(cli, ["status", "--endpoint", run.endpoint, "--timeout", "20"]).output
        assert "learner-alpha" in table and "learner-beta" in table and "alpha" in table.split("learner-beta")[-1]
    finally:
        run.close()


def test_one_policy_learner_joins_from_elsewhere(tmp_path, procs):
    from tests.system.test_supervisor import Run, rows

    run = Run(
        tmp_path,
        [m for m in MULTI if not m.startswith(("learner.checkpoint", "supervisor."))]
        + ["policies.beta.learner.remote=true", "supervisor.liveness_timeout_s=20"],
    )
    try:
        data = run.wait(lambda d: rows(d)["actor-0"]["stage"] == "connect", 60, "the actor waiting for beta's learner")
        assert "learner-alpha" in rows(data) and "learner-beta" not in rows(data)
        procs.start(
            "learner-beta",
            "learner",
            str(tmp_path / "run" / "config.toml"),
            "--policy",
            "beta",
            "--join",
            run.endpoint,
            "--bind",
            "tcp://127.0.0.1:*",
        )
        data = run.wait(
            lambda d: (
                rows(d).get("learner-beta", {}).get("state") == "REMOTE"
                and rows(d)["actor-0"]["state"] == "RUNNING"
                and (rows(d)["learner-beta"]["counters"].get("transitions_inserted") or 0) > 0
            ),
            60,
            "beta's joined learner receiving its agents' transitions",
        )
        states = {p["policy"]: p["state"] for p in data["policies"]}
        assert states == {"alpha": "RUNNING", "beta": "REMOTE"}
    finally:
        run.close()


def test_each_policy_can_train_with_its_own_algorithm(tmp_path, procs, collector):
    # alpha keeps the run's double_dqn; beta learns with APPO from the same actor's worlds.
    config, path = write_config(tmp_path, MULTI + ["policies.beta.algorithm={name='appo', batch_size=64}"])
    learners = train_alpha_and_beta(procs, collector, path, 10)
    for name in learners:
        assert collector.counter(name, "batches_malformed", 0) == 0, f"{name} dropped batches as malformed"
    # APPO publishes after every update; DQN every publish_interval_updates (10).
    beta = collector.beats["learner-beta"].counters
    alpha = collector.beats["learner-alpha"].counters
    assert beta["version"] >= beta["updates"] > 10
    assert alpha["version"] <= alpha["updates"] // 10 + 2
    codes = procs.stop_all()
    assert all(code == 0 for code in codes.values()), codes


def test_one_policy_down_leaves_the_other_training_and_status_says_which(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from tests.system.harness import ROOT
    from tests.system.test_supervisor import Run, rows

    # beta's learner trains until it is killed; every restart then fails, so it crash-loops into FATAL.
    marker = tmp_path / "beta-built"
    run = Run(
        tmp_path,
        [m for m in MULTI if not m.startswith(("learner.checkpoint", "supervisor.", "env.id"))]
        + [
            "env.id='tests.multiagent_envs:turn_aec_failing_in'",
            f"env.kwargs={{daemon='learner-beta', marker='{marker}'}}",
            "supervisor.crash_loop_max=2",
            "supervisor.liveness_timeout_s=20",
        ],
    )
    try:
        data = run.wait(lambda d: all((p["updates"] or 0) > 0 for p in d["policies"]), 90, "both learners training")
        actor_pid = rows(data)["actor-0"]["pid"]
        os.kill(rows(data)["learner-beta"]["pid"], signal.SIGKILL)
        data = run.wait(lambda d: rows(d)["learner-beta"]["state"] == "FATAL", 90, "beta's learner FATAL")
        updates = rows(data)["learner-alpha"]["counters"].get("updates", 0)
        data = run.wait(
            lambda d: rows(d)["learner-alpha"]["counters"].get("updates", 0) > updates + 20,
            90,
            "alpha training on after beta went down",
        )
        assert {p["policy"]: p["state"] for p in data["policies"]} == {"alpha": "RUNNING", "beta": "FATAL"}
        assert "cannot be built again in learner-beta" in rows(data)["learner-beta"]["last_error"]
        assert rows(data)["actor-0"]["pid"] == actor_pid  # the actor acts on for both; beta's batches wait, then drop
        status = subprocess.run(
            [sys.executable, "-m", "tandem", "status", "--endpoint", run.endpoint, "--timeout", "20"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert status.returncode == 5 and "policy beta is down: learner-beta is FATAL" in status.stderr, status.stderr
    finally:
        run.close()


POOLED = [  # Connect Four self-play with a small pool, for this test and the league's
    "model.kind='mlp'",  # the pool, seats and ratings are under test, not the example's network (beside its config)
    "env.num_envs=8",
    "actors.unroll_length=8",
    "algorithm.batch_size=256",
    "algorithm.minibatches=2",
    "learner.pool_every=2",
    "learner.pool_size=3",
    "selfplay.games_per_draw=8",  # a new opponent drawn every 8 games: several loads within a test's games
]
SELFPLAY = [
    *POOLED,
    "learner.checkpoint_interval_s=1.0",
    "supervisor.heartbeat_interval_s=0.2",
    "actors.weights_refresh_s=0.5",
]


def test_selfplay_plays_pooled_versions_keeps_the_pool_bounded_and_outlives_its_learner(tmp_path, procs, collector):
    """Connect Four by self-play as real processes: the learner keeps every 2nd version (at most 3 on disk), the
    actor draws its opponents from them, trains only its learning seat, and keeps playing when the learner dies.
    A random player takes a fifth of the games, counted apart from the pool's."""
    scripted = ["selfplay.scripted_opponent='random'", "selfplay.scripted_share=0.2"]
    config, path = write_config(tmp_path, SELFPLAY + scripted, base="examples/connect_four_selfplay.toml")
    start_learner(procs, collector, path, "default")
    procs.start("actor-0", "actor", str(path), "--index", "0", "--control", collector.endpoint)
    collector.wait_for(
        lambda: (
            collector.counter("learner-default", "pool_snapshots_removed", 0) >= 2
            and collector.counter("actor-0", "opponent_loads", 0) >= 2
            and collector.counter("actor-0", "selfplay_games", 0) >= 50
            and collector.counter("actor-0", "selfplay_scripted_games", 0) >= 5
        ),
        120,
        "pooled opponents played in 50 games",
        procs,
    )
    pool_dir = tmp_path / "run" / "learner-default" / "pool"
    assert 1 <= len(list(pool_dir.glob("v*.blob"))) <= 3
    games = collector.counter("actor-0", "selfplay_games")
    outcomes = sum(collector.counter("actor-0", f"selfplay_{k}") for k in ("wins", "draws", "losses"))
    assert outcomes == games and 0.0 <= collector.counter("actor-0", "selfplay_win_rate") <= 1.0
    assert (
        0
        <= collector.counter("actor-0", "selfplay_scripted_wins")
        <= collector.counter("actor-0", "selfplay_scripted_games")
    )
    assert 0.0 <= collector.counter("actor-0", "selfplay_scripted_win_rate") <= 1.0
    assert collector.counter("learner-default", "batches_malformed", 0) == 0
    # The games rode on the batches: the learner rated them (the rating starts at 25).
    collector.wait_for(lambda: collector.counter("learner-default", "rated_games", 0) > 0, 20, "games rated", procs)
    assert collector.counter("learner-default", "train_rating") > 0
    assert 0.0 <= collector.counter("learner-default", "train_pool_win_rate") <= 1.0
    # Only the learning seat is trained on: about half of the turns the actor took reach the learner.
    inserted = collector.counter("learner-default", "transitions_received")
    steps = collector.counter("actor-0", "env_steps")
    assert 0.3 * steps < inserted < 0.6 * steps + 2048, (inserted, steps)

    procs.kill("learner-default")
    steps_then, games_then = collector.counter("actor-0", "env_steps"), collector.counter("actor-0", "selfplay_games")
    collector.wait_for(
        lambda: (
            collector.counter("actor-0", "selfplay_games") >= games_then + 30
            and collector.counter("actor-0", "env_steps") > steps_then
        ),
        30,
        "games going on without the learner",
        procs,
    )
