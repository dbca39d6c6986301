"""Checkpoints the evaluator keeps beside the learner's: each policy's best-evaluated weights and the solving ones.

Why the evaluator writes them, not the learner: a round measures one weight version, and by the time the
round ends the learner has trained past it and no longer holds those weights; the evaluator holds exactly
what it measured (poll() never runs during a round). So after each round it saves, per policy:

- `learner-POLICY/best.pt`: the weights of the highest return so far (the policy's own agents' mean in a
  world, the round's mean otherwise); replaced only by a strictly higher return, as Stable-Baselines3's
  EvalCallback keeps `best_model`. It is read back at start, so a restarted evaluator or a resumed run
  goes on comparing against it.
- `learner-POLICY/solved.pt`: the weights of the first round whose return met `stop.eval_return` (every
  policy's, from that one round); never replaced.

One file of each kind per policy, written atomically (temp file, fsync, rename). They hold the acting
network only, in the learner checkpoint's layout (`algorithm.PART`, PART the spec's acting_network), so `load_policy`
reads them like any checkpoint; training never resumes from them: the learner reads and prunes only
`ckpt-*.pt` and removes only its own `.ckpt-*.tmp` leftovers, and the evaluator's temp files are `.kept-*.tmp`.
`--fresh` moves them with the learner's directory. The bytes come from the evaluator's own network
(`torch.save` of its tensors), never from a message: nothing that crossed a socket is unpickled.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from tandem.daemons.algorithms.registry import find_algorithm

log = logging.getLogger(__name__)

LATEST = "latest"  # the learner's newest ckpt-*.pt
KEPT_FILES = {"best": "best.pt", "solved": "solved.pt"}
CHOICES = (LATEST, *KEPT_FILES)
TEMP_PREFIX = ".kept-"


def acting_network(algorithm: str) -> str | None:
    """The part of a learner checkpoint's `algorithm` state that algorithm `algorithm`'s actors run (what its
    weights() publishes), or None for a name that finds no algorithm."""
    try:
        return find_algorithm(algorithm).acting_network
    except ValueError:
        return None


def policy_returns(counters: Mapping[str, float], policies: list[str]) -> dict[str, float]:
    """Each policy's return in a finished round's counters (see rounds.round_counters); a policy whose agents
    finished no episode in the round is left out."""
    if len(policies) == 1 and f"eval_return.{policies[0]}" not in counters:
        return {policies[0]: counters["eval_return"]}
    return {p: counters[f"eval_return.{p}"] for p in policies if f"eval_return.{p}" in counters}


def improves(value: float, best: float | None) -> bool:
    """Whether a round's return replaces the kept best: strictly higher (a tie keeps the earlier), and finite."""
    return math.isfinite(value) and (best is None or value > best)


def solves(value: float | None, target: float | None) -> bool:
    """The supervisor's stop test (daemons/supervisor/progress.py): the round's mean return at or above the target."""
    return target is not None and value is not None and value >= target


def kept_state(algorithm: str, part: str, version: int, weights: Mapping[str, np.ndarray], evaluation: dict) -> dict:
    """A checkpoint of the acting network only (as `part` of the learner's state), readable with
    torch.load(weights_only=True)."""
    import torch

    tensors = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in weights.items()}
    return {
        "version": int(version),
        "algorithm": {"algorithm": algorithm, part: tensors},
        "evaluation": evaluation,
    }


def read_evaluation(path: Path) -> dict | None:
    """The `evaluation` record of a kept checkpoint (a local file this run wrote), or None if absent or unreadable."""
    import torch

    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torn or corrupt: it will be replaced by the next round
        log.warning("cannot read %s (%s: %s); the next round replaces it", path, type(exc).__name__, exc)
        return None
    evaluation = state.get("evaluation") if isinstance(state, dict) else None
    return evaluation if isinstance(evaluation, dict) else None


class KeptCheckpoints:
    """The best and solving checkpoints of every policy an evaluator plays, updated after each round."""

    def __init__(self, directories: Mapping[str, Path], algorithms: Mapping[str, str], target: float | None):
        self.directories = {p: Path(d) for p, d in directories.items()}
        self.algorithms = dict(algorithms)
        self.parts = {p: acting_network(a) for p, a in self.algorithms.items()}
        self.target = target
        self.write_failures = 0
        unknown = sorted(p for p, part in self.parts.items() if part is None)
        if unknown:
            log.warning(
                "no best or solved checkpoints for %s: algorithm.name finds no algorithm to tell its acting network",
                ", ".join(unknown),
            )
        self.best: dict[str, float | None] = {}
        for policy, directory in self.directories.items():
            record = read_evaluation(directory / KEPT_FILES["best"])
            value = record.get("return") if record else None
            self.best[policy] = float(value) if isinstance(value, (int, float)) else None
        self.solved = any((d / KEPT_FILES["solved"]).is_file() for d in self.directories.values())
        for directory in self.directories.values():  # what a write killed midway left (one evaluator per run)
            for leftover in directory.glob(f"{TEMP_PREFIX}*.tmp"):
                leftover.unlink(missing_ok=True)

    def counters(self) -> dict[str, float]:
        """What the evaluator reports: each policy's best return so far and failed writes."""
        best = {f"eval_best_return.{p}": v for p, v in self.best.items() if v is not None}
        return {**best, "kept_write_failures": self.write_failures}

    def after_round(
        self,
        counters: Mapping[str, float],
        versions: Mapping[str, int],
        round_no: int,
        episodes: int,
        weights: Callable[[str], Mapping[str, np.ndarray]],
    ) -> list[Path]:
        """Save what this round earned (call before reporting it, so a stop on it finds solved.pt written);
        `weights(policy)` gives the weights the round played with. Returns the files written."""
        returns = policy_returns(counters, list(self.directories))
        base = {
            "round": round_no,
            "episodes": episodes,
            "round_return": float(counters["eval_return"]),
            "versions": {p: int(v) for p, v in versions.items()},
            "time": time.time(),
        }
        wanted: list[tuple[str, str, dict]] = []
        for policy, value in returns.items():
            if improves(value, self.best[policy]):
                wanted.append(
                    (
                        policy,
                        "best",
                        {**base, "kind": "best", "return": float(value), "previous_best": self.best[policy]},
                    )
                )
        if not self.solved and solves(counters.get("eval_return"), self.target):
            for policy in self.directories:
                wanted.append(
                    (policy, "solved", {**base, "kind": "solved", "return": returns.get(policy), "target": self.target})
                )
        written = []
        for policy, kind, evaluation in wanted:
            if self.parts[policy] is None:
                continue
            path = self.write(policy, kind, versions[policy], weights(policy), evaluation)
            if path is not None:
                written.append(path)
                if kind == "best":
                    self.best[policy] = evaluation["return"]
                else:
                    self.solved = True
        return written

    def write(
        self, policy: str, kind: str, version: int, weights: Mapping[str, np.ndarray], evaluation: dict
    ) -> Path | None:
        from tandem.daemons.checkpoints.files import write_atomic

        path = self.directories[policy] / KEPT_FILES[kind]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            state = kept_state(self.algorithms[policy], self.parts[policy], version, weights, evaluation)
            write_atomic(path, state, TEMP_PREFIX)
        except OSError as exc:  # a full disk: counted and logged; evaluation and training go on
            self.write_failures += 1
            log.warning("cannot write %s (%s); %d failed writes", path, exc, self.write_failures)
            return None
        log.info(
            "kept %s of policy %s: version %d, evaluation return %.2f -> %s",
            kind,
            policy,
            version,
            evaluation["return"] if evaluation["return"] is not None else float("nan"),
            path,
        )
        return path
