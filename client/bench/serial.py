"""`tandem bench serial`: an on-policy learner and its policy in one process, no daemons: env steps to a target."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import click
import numpy as np

from tandem.client.bench.options import json_option, seed_options
from tandem.client.bench.report import finish, progress
from tandem.client.config_cmd import bench_set_option

EVAL_EPISODES = 20  # episodes of one greedy evaluation, as the references were judged


class SerialRun:
    """K gymnasium envs stepped in turn with the run's policy; an update whenever batch_size steps are in.

    The same algorithm objects as the daemons (`make_algorithm`, `make_policy`) and the same wire batches
    (`TransitionBatch`), but no sockets, no lag and no evaluator process: what it measures is the
    learning rule alone, deterministic for a seed.
    """

    def __init__(self, config, seed: int, lag: int = 0):
        import gymnasium as gym

        from tandem.daemons.algorithms import make_algorithm, make_policy

        self.config, self.seed = config, seed
        self.num_envs, self.steps_per_unroll = config.env.num_envs, config.actors.unroll_length
        self.envs = [gym.make(config.env.id, **config.env.kwargs) for _ in range(self.num_envs)]
        self.obs = np.stack([env.reset(seed=seed * 1000 + k)[0] for k, env in enumerate(self.envs)])
        obs_space, action_space = self.envs[0].observation_space, self.envs[0].action_space
        self.learner = make_algorithm(config, obs_space, action_space, "cpu")
        self.policy = make_policy(config, obs_space, action_space, seed=seed + 1000)
        self.policy.load_weights(self.learner.weights())
        self.eval_env = gym.make(config.env.id, **config.env.kwargs)
        self.env_steps, self.version, self.queue, self.queued = 0, 0, [], 0
        self.lag = lag  # the acting policy trails the learner by this many versions, as an async actor does
        self.published = [self.learner.weights()]  # the newest lag + 1 versions, oldest first

    def unroll(self):
        from tandem.protocol import TransitionBatch

        t_max, k_max = self.steps_per_unroll, self.num_envs
        obs = np.empty((t_max + 1, *self.obs.shape), self.obs.dtype)
        actions, extras, finals = [], {}, []
        rewards = np.zeros((t_max, k_max), np.float32)
        terminated, truncated = np.zeros((t_max, k_max), bool), np.zeros((t_max, k_max), bool)
        for t in range(t_max):
            obs[t] = self.obs
            chosen, extra = self.policy.explore(self.obs, np.zeros(k_max))
            actions.append(chosen)
            for name, value in extra.items():
                extras.setdefault(name, []).append(value)
            for k, env in enumerate(self.envs):
                action = chosen[k].item() if np.ndim(chosen[k]) == 0 else chosen[k]
                ob, reward, term, trunc, _ = env.step(action)
                rewards[t, k], terminated[t, k], truncated[t, k] = reward, term, trunc and not term
                if term or trunc:
                    if truncated[t, k]:
                        finals.append(ob)
                    ob, _ = env.reset()
                self.obs[k] = ob
        obs[t_max] = self.obs
        final_obs = np.stack(finals).astype(obs.dtype) if finals else np.zeros((0, *obs.shape[2:]), obs.dtype)
        self.env_steps += t_max * k_max
        acted = max(0, self.version - self.lag)
        return TransitionBatch(
            "default",
            "serial",
            0,
            self.version,
            acted,
            self.env_steps,
            obs,
            np.stack(actions),
            rewards,
            terminated,
            truncated,
            final_obs,
            {name: np.stack(values) for name, values in extras.items()},
        )

    def step(self) -> None:
        """One unroll, and an update (then new weights for the policy) when a batch is complete."""
        batch = self.unroll()
        self.queue.append(batch)
        self.queued += batch.num_transitions
        if self.queued >= self.config.algorithm.batch_size:
            self.learner.update(self.queue)
            self.queue, self.queued = [], 0
            self.version += 1
            self.published = [*self.published, self.learner.weights()][-(self.lag + 1) :]
            self.policy.load_weights(self.published[0])

    def greedy_return(self, target: float, max_return: float | None) -> float | None:
        """Mean return of EVAL_EPISODES greedy episodes from fixed seeds; None as soon as it cannot reach `target`
        even if every episode left scored `max_return` (when known: CartPole's is its time limit)."""
        total = 0.0
        for i in range(EVAL_EPISODES):
            ob, _ = self.eval_env.reset(seed=(self.seed + 100) * 1000 + i)
            done = False
            while not done:
                action = self.policy.act(np.asarray(ob)[None], np.zeros(1))[0]
                ob, reward, term, trunc, _ = self.eval_env.step(action.item() if np.ndim(action) == 0 else action)
                total += float(reward)
                done = term or trunc
            if max_return is not None and total + (EVAL_EPISODES - i - 1) * max_return < target * EVAL_EPISODES:
                return None
        return total / EVAL_EPISODES


def run_seed(
    config, seed: int, target: float, max_steps: int, eval_every: int, max_return: float | None, lag: int = 0
) -> dict:
    run = SerialRun(config, seed, lag)
    started, eval_s, next_eval, last = time.monotonic(), 0.0, eval_every, None
    while run.env_steps < max_steps:
        run.step()
        if run.env_steps >= next_eval:
            next_eval += eval_every
            began = time.monotonic()
            last = run.greedy_return(target, max_return)
            eval_s += time.monotonic() - began
            if last is not None and last >= target:
                break
    return {
        "seed": seed,
        "solved": last is not None and last >= target,
        "env_steps": run.env_steps,
        "updates": run.version,
        "train_s": round(time.monotonic() - started - eval_s, 2),
        "eval_return": last,
    }


@click.command("serial")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="An on-policy run (APPO or IMPALA) of one gymnasium env.",
)
@seed_options(8)
@click.option(
    "--target", type=float, default=None, help="Greedy mean return that counts as solved  [default: stop.eval_return]."
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=150_000,
    show_default=True,
    help="Env steps after which a seed counts as unsolved.",
)
@click.option(
    "--eval-every",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Env steps between two greedy evaluations (training waits while they play).",
)
@click.option(
    "--max-return",
    type=float,
    default=None,
    help="The most one episode can score (CartPole-v1: 500): an evaluation stops once the target is out of "
    "reach. The result is the same; only the time spent evaluating is shorter.",
)
@click.option(
    "--lag",
    type=click.IntRange(min=0, max=16),
    default=0,
    show_default=True,
    help="Act with the weights this many versions behind the learner's (an async run's actor is about 1).",
)
@bench_set_option
@json_option
def serial_cmd(
    config_path: Path,
    seeds: int,
    first_seed: int,
    target: float | None,
    max_steps: int,
    eval_every: int,
    max_return: float | None,
    lag: int,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Env steps until a greedy evaluation clears the target, the learning rule alone (one process, one core)."""
    from tandem.daemons.algorithms import algorithm_of
    from tandem.daemons.config.loader import load_config
    from tandem.daemons.runtime.torch_threads import set_torch_threads
    from tandem.daemons.settings.fields import ConfigError

    try:
        config = load_config(config_path, overrides)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    if not algorithm_of(config).on_policy or config.policies or config.env.atari.enabled or ":" in config.env.id:
        raise click.UsageError(
            "bench serial takes an on-policy run (APPO, IMPALA) of one gymnasium id, without [policies] or [env.atari]"
        )
    target = target if target is not None else config.stop.eval_return
    if target is None:
        raise click.UsageError("no target: set stop.eval_return in the config or pass --target")
    set_torch_threads(1)
    say, runs = progress(as_json), []
    for seed in range(first_seed, first_seed + seeds):
        runs.append(r := run_seed(config, seed, target, max_steps, eval_every, max_return, lag))
        say(
            f"seed {seed}: {'solved' if r['solved'] else 'NOT solved'} at {r['env_steps']} env steps, "
            f"{r['updates']} updates, {r['train_s']:.2f} s of training"
        )
    steps = [r["env_steps"] if r["solved"] else max_steps for r in runs]  # unsolved counts as the limit
    record = {
        "benchmark": "serial",
        "config": str(config_path),
        "overrides": list(overrides),
        "target": target,
        "lag": lag,
        "runs": runs,
        "median_env_steps": statistics.median(steps),
        "max_env_steps": max(steps),
        "median_train_s": statistics.median(r["train_s"] for r in runs),
        "solved": sum(r["solved"] for r in runs),
    }
    summary = (
        f"median {record['median_env_steps']:.0f} env steps (worst {record['max_env_steps']}), "
        f"{record['median_train_s']:.2f} s of training; {record['solved']}/{seeds} solved"
    )
    finish(record, as_json, [summary])
