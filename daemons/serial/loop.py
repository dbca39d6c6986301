"""The serial loop: act, hand the unrolls to the learner, train, publish to the policy, evaluate now and then."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.stop_rule import stop_reason
from tandem.daemons.serial.curves import SerialCurves
from tandem.daemons.serial.determinism import make_deterministic
from tandem.daemons.serial.interrupt import stop_on_signals
from tandem.daemons.serial.parts import SerialActor, SerialEvaluator, SerialLearner
from tandem.daemons.serial.run_dir import learner_checkpointer, open_run_dir
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.settings.setup_errors import SetupError

DEFAULT_EVAL_EVERY = 5000  # env steps between two evaluation rounds (and metrics records)


class SerialRun:
    """One actor, one learner and one evaluator of `config` taking turns in this process.

    `lag` > 0: the actor acts with the weights that many versions behind the learner's, as an async actor
    does about once (a serial twin of an async run's staleness).
    """

    def __init__(self, config: RunConfig, lag: int = 0, evaluate: bool = True):
        if config.policies:
            raise SetupError("serial mode trains one policy: a config with [policies] needs `tandem up` without it")
        if config.selfplay.enabled:  # its opponents come from a learner's pool over the snapshot socket
            raise SetupError("serial mode has no opponent pool: a config with [selfplay] needs `tandem up` without it")
        make_deterministic(config.run.seed)
        self.config = config
        self.actor = SerialActor(config)
        self.learner = SerialLearner(config, self.actor.spaces)
        self.evaluator = SerialEvaluator(config) if evaluate else None
        self.published: deque[tuple[int, dict[str, np.ndarray]]] = deque(maxlen=lag + 1)
        self.lag_mean = 0.0
        self.publish()

    @property
    def env_steps(self) -> int:
        return self.actor.env_steps

    @property
    def updates(self) -> int:
        return self.learner.updates

    def publish(self) -> None:
        """The learner's newest weights, to the actor's policy (the oldest of the last lag + 1 versions)."""
        self.published.append((self.learner.version, self.learner.weights()))
        self.actor.load(*self.published[0])

    def step(self) -> None:
        """One round of whole unrolls through the learner's intake, then the updates they pay for."""
        for batch in self.actor.unrolls():
            self.learner.receive(batch)
        if (lag := self.learner.intake.take_lag_mean()) is not None:
            self.lag_mean = lag  # versions behind the learner's on arrival (0 unless `lag`)
        if self.learner.train():
            self.publish()

    def evaluate(self) -> dict[str, float]:
        if self.evaluator is None:
            raise RuntimeError("this serial run was built without an evaluator")
        return self.evaluator.evaluate(self.learner.version, self.learner.weights())

    def figures(self) -> dict[str, Any]:
        """The training side of a metrics.jsonl record, named as an async run's (the last update's as train/NAME)."""
        return {
            "env_steps": self.env_steps,
            "updates": self.updates,
            "episodes": self.actor.stepping.episodes,
            "mean_return_100": self.actor.recent_return(),
            "version": self.learner.version,
            "lag_mean": round(self.lag_mean, 2),
            "batches_dropped": 0,  # nothing stands between the actor and the learner to drop a batch
            **{k: v for k, v in self.learner.counts.items() if k.startswith("batches_") or k == "checkpoints"},
            "train": dict(self.learner.metrics),
        }

    def close(self) -> None:
        self.actor.close()
        if self.evaluator is not None:
            self.evaluator.close()


@dataclass
class Outcome:
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    interrupted: bool = False  # SIGTERM or SIGINT ended it, not a [stop] condition


def serial_stop_reason(config: RunConfig, figures: dict[str, Any], elapsed_s: float) -> str | None:
    """The [stop] condition `figures` meet, by the rule a daemon run ends by (runtime/stop_rule.py), or None."""
    return stop_reason(
        config.stop,
        eval_return=figures.get("eval_return"),
        mean_return=figures.get("mean_return"),
        env_steps=figures["env_steps"],
        elapsed_s=elapsed_s,
    )


def run_serial(
    config: RunConfig,
    eval_every: int = DEFAULT_EVAL_EVERY,
    directory: Path | None = None,
    show: Callable[[dict[str, Any]], None] | None = None,
    fresh: bool = False,
    plugin_paths: tuple[str, ...] = (),
    announce: Callable[[str], None] | None = None,
) -> Outcome:
    """Train until a [stop] condition; a round of evaluation and a metrics record every `eval_every` env steps.

    `directory`: the run directory, made one as `tandem up` makes it (run_dir.py: config.toml, the learner's
    checkpoints, metrics.jsonl), `fresh` moving an earlier run there aside; `show` is given each record.
    SIGTERM and Ctrl-C end it as a stop does (Outcome.interrupted), a last checkpoint and record written on the way
    out."""
    if not any(getattr(config.stop, key) is not None for key in ("env_steps", "eval_return", "mean_return", "seconds")):
        raise SetupError("serial mode needs a [stop] condition (env_steps, eval_return, mean_return or seconds)")
    run = SerialRun(config, evaluate=config.eval.enabled)  # before the directory: a config it refuses changes nothing
    try:
        lock = open_run_dir(config, directory, fresh, plugin_paths, announce) if directory is not None else None
    except BaseException:
        run.close()
        raise
    try:
        return train(run, eval_every, directory, show)
    finally:
        if lock is not None:
            lock.close()


def train(
    run: SerialRun, eval_every: int, directory: Path | None, show: Callable[[dict[str, Any]], None] | None
) -> Outcome:
    """run_serial's loop; closes `run`. SIGTERM and SIGINT are checked between steps."""
    with stop_on_signals() as stop:
        return train_until(run, stop, eval_every, directory, show)


def train_until(
    run: SerialRun,
    stop: StopFlag,
    eval_every: int,
    directory: Path | None,
    show: Callable[[dict[str, Any]], None] | None,
) -> Outcome:
    started = time.monotonic()
    curves = SerialCurves(directory, started)
    checkpointer = learner_checkpointer(run.config, run.learner, directory) if directory is not None else None
    if checkpointer is not None:
        checkpointer.start(started)  # the learner daemon's schedule: soon after start, then every interval
    next_eval, evaluation, reason, written = eval_every, {"eval_return": None}, None, False
    interrupted = False
    try:
        while reason is None:
            if stop:
                reason, interrupted = f"stopped on {stop.signal_name}", True
                break
            run.step()
            now = time.monotonic()
            curves.sample(now, run.env_steps, run.updates)
            if checkpointer is not None:
                checkpointer.tick(now)
            written = False
            if run.env_steps >= next_eval:
                next_eval += eval_every
                if run.evaluator is not None:
                    evaluation = run.evaluate()
                record = curves.record({**run.figures(), **evaluation}, time.monotonic())
                curves.write(record)
                written = True
                if show is not None:
                    show(record)
            reason = serial_stop_reason(run.config, {**run.figures(), **evaluation}, time.monotonic() - started)
    except KeyboardInterrupt:  # off the main thread, or before the handler was in place
        reason, interrupted = "stopped on SIGINT", True
    finally:
        try:
            if checkpointer is not None:
                checkpointer.save()  # as a learner does when stopped; a refused write is counted, not raised
            record = curves.record({**run.figures(), **evaluation}, time.monotonic())
            if not written:
                curves.write(record)
        finally:
            curves.close()
            weights = run.learner.weights()
            run.close()
    return Outcome(reason, record, weights, interrupted)
