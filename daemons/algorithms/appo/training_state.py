"""An APPO learner's training state for checkpoints: the network, the optimizer, the update count and the return
statistics, and loading it back with checks that name what does not fit."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.actor_critic import network_form_hint
from tandem.daemons.algorithms.entity_norm import with_fresh_statistics
from tandem.daemons.algorithms.running_norm import RunningMeanStd
from tandem.daemons.algorithms.torch_util import check_tensors, cpu_copy

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.learner import APPO

log = logging.getLogger(__name__)


def training_state(algo: APPO) -> dict[str, Any]:
    state = {
        "algorithm": algo.name,
        "net": cpu_copy(algo.net.state_dict()),
        "optimizer": cpu_copy(algo.optimizer.state_dict()),
        "updates": int(algo.updates),
    }
    if algo.value_norm is not None:
        state["value_norm"] = cpu_copy(algo.value_norm.state_dict())
    return state


def load_training_state(algo: APPO, state: Mapping[str, Any]) -> None:
    """`algo` resumed from `training_state` output; the config's learning rate (and decay) wins over the saved one."""
    if state.get("algorithm") != algo.name:
        raise ValueError(f"state is for algorithm {state.get('algorithm')!r}, not {algo.name!r}")
    if isinstance(state.get("net"), Mapping):
        state = {**state, "net": with_fresh_statistics(algo.net, state["net"])}
    try:
        check_tensors(algo.net.state_dict(), state["net"], numpy=False)
    except (KeyError, ValueError) as exc:
        raise ValueError(
            f"saved network does not fit this model{network_form_hint(algo.net, state['net'])}: {exc}"
        ) from exc
    algo.optimizer.load_state_dict(state["optimizer"])
    algo.net.load_state_dict(state["net"])
    algo.updates = int(state["updates"])
    algo.set_learning_rate()  # the config's, decayed by the updates already made
    saved_norm = state.get("value_norm")
    if algo.value_norm is not None and isinstance(saved_norm, Mapping):
        check_tensors(algo.value_norm.state_dict(), saved_norm, numpy=False)
        algo.value_norm.load_state_dict(saved_norm)
    elif algo.value_norm is not None:  # a checkpoint from before normalize_returns: its statistics start afresh
        algo.value_norm = RunningMeanStd((1,)).to(algo.device)
        log.warning(
            "the checkpoint has no return statistics (trained without algorithm.normalize_returns): "
            "they start afresh, and the value output is read in their units from now on"
        )
