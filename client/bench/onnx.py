"""`tandem bench onnx`: an exported policy acting in ONNX Runtime against Tandem's own acting, in one run.

Two cases, each network as its example config builds it (the weights do not change the time): CartPole's MLP on
one observation, against the numpy twin Tandem's actors act with for small batches; Pong's Nature CNN on a batch
of 8 stacked frames, against torch. Each figure is the median over repeats of the mean time of one call.
"""

from __future__ import annotations

import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from tandem.client.bench.options import json_option, quick_option
from tandem.client.bench.report import finish, target_lines
from tandem.client.bench.transport_figures import machine

CASES = {  # name -> (example config, batch, the limit on ONNX Runtime's time over Tandem's)
    "cartpole_mlp_one": ("cartpole_appo.toml", 1, 1.5),
    "pong_cnn_batch8": ("pong_appo.toml", 8, 1.5),
}


def examples_dir() -> Path:
    from tandem.client.bench.examples import example_config

    return Path(example_config("cartpole_appo.toml")).parent


def exported(example: str, where: Path):
    """(Tandem's policy, its ONNX Runtime agent, observations [64, ...]) for the example's network, fresh weights."""
    from tandem import load_policy
    from tandem.client.api.onnx_export import export_onnx
    from tandem.client.onnx_agent import OnnxAgent
    from tandem.daemons.algorithms import make_algorithm
    from tandem.daemons.checkpoints.files import save_checkpoint
    from tandem.daemons.config import load_config, render_toml
    from tandem.daemons.envs.gym_envs import make_env
    from tandem.daemons.envs.probe import probe_policy_spaces

    run = where / example.split(".")[0]
    run.mkdir(parents=True)
    config = load_config(examples_dir() / example, [f"run.dir='{run}'"])
    (run / "config.toml").write_text(render_toml(config))
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 1, "updates": 1})
    policy = load_policy(run)
    agent = OnnxAgent(export_onnx(policy, run / "export"))
    env = make_env(config.env)
    obs, _ = env.reset(seed=0)
    rows = []
    for _ in range(64):
        rows.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return policy, agent, np.stack(rows)


def mean_call_s(act, inputs: list, seconds: float) -> float:
    """The mean time of one call over `seconds`, cycling through `inputs`."""
    for x in inputs[:8]:
        act(x)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        act(inputs[calls % len(inputs)])
        calls += 1
    return (time.perf_counter() - start) / calls


@click.command("onnx")
@click.option("--seconds", default=2.0, show_default=True, help="Measuring window per path and repeat (--quick: 0.3).")
@click.option("--repeats", default=5, show_default=True, help="Rounds over both paths; medians (--quick: 1).")
@json_option
@quick_option("One short window per path")
def onnx_cmd(seconds: float, repeats: int, as_json: bool, quick: bool) -> None:
    """An exported policy in ONNX Runtime against Tandem's own acting: CartPole's MLP, Pong's CNN batch of 8."""
    import torch

    if quick:
        seconds, repeats = 0.3, 1
    torch.set_num_threads(1)  # one thread each, as an actor and a game acting in one process would
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (example, batch, limit) in CASES.items():
            policy, agent, obs = exported(example, Path(tmp))
            inputs = [obs[i : i + batch] for i in range(0, len(obs) - batch + 1, batch)]
            if batch == 1:
                inputs = [o[0] for o in inputs]
            times = {"onnx": [], "tandem": []}
            for _ in range(repeats):  # interleaved, so a burst of load elsewhere hits both alike
                times["tandem"].append(mean_call_s(policy.act, inputs, seconds))
                times["onnx"].append(mean_call_s(agent.act, inputs, seconds))
            onnx_us, tandem_us = (statistics.median(times[k]) * 1e6 for k in ("onnx", "tandem"))
            rows.append({"case": name, "batch": batch, "onnx_us": round(onnx_us, 1), "tandem_us": round(tandem_us, 1),
                         "ratio": round(onnx_us / tandem_us, 3), "limit": limit})  # fmt: skip
    met = {f"{r['case']} ONNX <= {r['limit']}x Tandem": r["ratio"] <= r["limit"] for r in rows}
    record = {
        "benchmark": "onnx",
        "quick": quick,
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "cpu_count": os.cpu_count(),
        "rows": rows,
        "targets": met,
    }
    lines = [f"one thread each, medians of {repeats} x {seconds:g} s, {os.cpu_count()} CPUs"]
    lines += [
        f"  {r['case']:18} ONNX Runtime {r['onnx_us']:>9.1f} us   Tandem {r['tandem_us']:>9.1f} us   x{r['ratio']:.2f}"
        for r in rows
    ]
    finish(record, as_json, [*lines, *target_lines(met)])
