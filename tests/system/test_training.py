"""A learner and two actors as real processes on loopback: they learn CartPole, and survive a killed learner."""

from __future__ import annotations

import time

import numpy as np
import psutil

from tandem.daemons.acting.weights_client import WeightsClient
from tandem.daemons.algorithms import make_policy
from tandem.daemons.envs.gym_envs import make_env
from tandem.daemons.runtime.endpoints import learner_endpoints
from tandem.protocol import sockets
from tests.system.harness import write_config

FAST = [
    "eval.enabled=false",
    "actors.count=2",
    "learner.checkpoint_interval_s=1.0",
    "supervisor.heartbeat_interval_s=0.2",
    "actors.weights_refresh_s=0.5",
]


def start_run(procs, collector, config_path, actors=2):
    procs.start("learner", "learner", str(config_path), "--control", collector.endpoint)
    for i in range(actors):
        procs.start(f"actor-{i}", "actor", str(config_path), "--index", str(i), "--control", collector.endpoint)


def mean_return(config, policy, episodes=10, seed=12345) -> float:
    env = make_env(config.env)
    returns = []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        total, done = 0.0, False
        while not done:
            action = policy(np.asarray(obs))
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def latest_weights(config):
    ctx = sockets.new_context()
    endpoints = learner_endpoints(config)
    client = WeightsClient(ctx, "default", endpoints.weights, endpoints.snapshot, "test", refresh_s=0.2)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            blob = client.poll()
            if blob is not None:
                return blob
            time.sleep(0.05)
        raise AssertionError("no weights from the learner's snapshot socket within 10 s")
    finally:
        client.close()
        sockets.close_context(ctx, 0)


def test_learner_and_two_actors_learn_cartpole(tmp_path, procs, collector):
    config, path = write_config(tmp_path, FAST + ["run.seed=3"])
    start_run(procs, collector, path)
    names = ["actor-0", "actor-1"]
    collector.wait_for(
        lambda: all(collector.counter(n, "version") > 0 for n in names),
        60,
        "both actors acting with a version > 0",
        procs,
    )
    first_version = collector.counter("learner-default", "version")
    collector.wait_for(
        lambda: collector.counter("learner-default", "updates", 0) >= 2000, 120, "2000 learner updates", procs
    )
    last_version = collector.counter("learner-default", "version")
    assert last_version > first_version + 50, (first_version, last_version)
    for name in names:
        versions = [b.counters["version"] for _, b in collector.history[name] if b.stage == "running"]
        assert versions and min(versions) > -1 and max(versions) > 0
        assert versions == sorted(versions), f"{name} went back to an older version"
    blob = latest_weights(config)
    env = make_env(config.env)
    greedy_policy = make_policy(config, env.observation_space, env.action_space, seed=0)
    greedy_policy.load_weights(blob.tensors)
    greedy = mean_return(config, lambda obs: int(greedy_policy.act(obs[None], np.zeros(1))[0]))
    rng = np.random.default_rng(0)
    random = mean_return(config, lambda obs: int(rng.integers(0, 2)))
    print(
        f"greedy return {greedy:.1f} vs random {random:.1f} after "
        f"{collector.counter('learner-default', 'updates')} updates"
    )
    # Random play lasts about 22 steps; DQN on CartPole is noisy, so "far above" is a 3x margin.
    assert greedy > 3 * random and greedy > 75, (greedy, random)
    codes = procs.stop_all()
    assert all(code == 0 for code in codes.values()), codes  # SIGTERM is a clean stop
    assert list((tmp_path / "run" / "learner-default").glob("ckpt-*.pt")), "no checkpoint written on SIGTERM"


def test_killed_learner_actors_keep_stepping_and_restart_resumes_higher(tmp_path, procs, collector):
    config, path = write_config(tmp_path, FAST + ["learner.replay_min_size=500"])
    start_run(procs, collector, path)
    collector.wait_for(
        lambda: (
            collector.counter("learner-default", "checkpoints", 0) >= 1
            and collector.counter("learner-default", "updates", 0) > 100
        ),
        90,
        "a checkpoint after 100 updates",
        procs,
    )
    collector.wait_for(
        lambda: all(collector.counter(f"actor-{i}", "version") > 0 for i in range(2)), 30, "actors with weights", procs
    )
    version_before = collector.counter("learner-default", "version")
    procs.kill("learner")
    killed_at = time.monotonic()
    rss = {n: [] for n in ("actor-0", "actor-1")}
    steps_at_kill = {n: collector.counter(n, "env_steps") for n in rss}
    while time.monotonic() - killed_at < 6:
        collector.pump()
        procs.check_alive()
        for n in rss:
            rss[n].append(psutil.Process(procs.procs[n].pid).memory_info().rss)
    for n in rss:
        assert collector.counter(n, "env_steps") > steps_at_kill[n] + 1000, f"{n} stopped stepping without its learner"
        assert collector.counter(n, "batches_dropped", 0) > 0, f"{n} dropped nothing while its learner was gone"
        growth = max(rss[n]) - rss[n][0]
        print(f"{n} RSS growth while the learner was dead: {growth / 2**20:.1f} MiB")
        assert growth < 32 * 2**20
    procs.start("learner", "learner", str(path), "--control", collector.endpoint)
    collector.wait_for(
        lambda: (
            collector.beats["learner-default"].stage == "running"
            and collector.counter("learner-default", "version") > version_before
        ),
        60,
        "the restarted learner running with a higher version",
        procs,
    )
    assert "resumed from checkpoint" in procs.log("learner")
    collector.wait_for(
        lambda: all(collector.counter(f"actor-{i}", "version") > version_before for i in range(2)),
        30,
        "actors following the restarted learner",
        procs,
    )
