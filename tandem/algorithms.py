"""The one module an algorithm of your own imports (docs/guides/extending.md, "Your own algorithm").

A plug-in algorithm is an `AlgorithmSpec` in a module of yours, named by `algorithm.name = "module:NAME"`. What it
builds from lives here, so that a plug-in never reaches into Tandem's internal modules, which may move:

    from tandem.algorithms import AlgorithmSection, AlgorithmSpec, UnrollFeed, UpdateResult, build_network, option

The config side (AlgorithmSpec, AlgorithmSection, option, redefault, ConfigError, RunConfig) imports no torch, as
reading a config must stay light; the rest is imported on first use (PEP 562), inside your factories.
"""

from __future__ import annotations

from typing import Any

from tandem import lazy_attribute

# name -> "module:attribute" it comes from; looked up on first use.
API = {
    # the spec and its [algorithm] section (light)
    "AlgorithmSpec": "tandem.daemons.algorithms.spec:AlgorithmSpec",
    "AlgorithmSection": "tandem.daemons.settings.schema:AlgorithmSection",
    "ReplaySection": "tandem.daemons.settings.schema:ReplaySection",  # the keys ReplayFeed reads, for its users
    "RunConfig": "tandem.daemons.settings.schema:RunConfig",
    "option": "tandem.daemons.settings.option:option",
    "redefault": "tandem.daemons.settings.schema:redefault",
    "ConfigError": "tandem.daemons.settings.fields:ConfigError",
    # what the learner and the actors call (the interfaces, and what update() returns)
    "Algorithm": "tandem.daemons.algorithms.base:Algorithm",
    "Policy": "tandem.daemons.algorithms.base:Policy",
    "Feed": "tandem.daemons.algorithms.base:Feed",
    "UpdateResult": "tandem.daemons.algorithms.base:UpdateResult",
    # the built-in feeds: whole unrolls in arrival order (on-policy), n-step transitions in a replay (off-policy)
    "UnrollFeed": "tandem.daemons.feeds.unroll_feed:UnrollFeed",
    "ReplayFeed": "tandem.daemons.feeds.replay_feed:ReplayFeed",
    # one optimizer step from a loss: zero, backward, clip, step; with replicas, the gradients averaged first and
    # their all-reduce overlapped with backward
    "gradient_step": "tandem.daemons.algorithms.gradient_step:gradient_step",
    # the network [model] describes (an MLP, the Nature CNN or model.kind = "module:callable"), with an output size
    "build_network": "tandem.daemons.algorithms.models:build_q_network",
    # the built-in algorithms and their sections, to build on (a spec of yours may reuse their factories)
    "APPO": "tandem.daemons.algorithms.appo.spec:APPO",
    "APPOSection": "tandem.daemons.algorithms.appo.spec:APPOSection",
    "IMPALA": "tandem.daemons.algorithms.appo.spec:IMPALA",
    "IMPALASection": "tandem.daemons.algorithms.appo.spec:IMPALASection",
    "DOUBLE_DQN": "tandem.daemons.algorithms.dqn.spec:DOUBLE_DQN",
    "DQNSection": "tandem.daemons.algorithms.dqn.spec:DQNSection",
    "SAC": "tandem.daemons.algorithms.sac.spec:SAC",
    "SACSection": "tandem.daemons.algorithms.sac.spec:SACSection",
}
__all__ = list(API)


def __getattr__(name: str) -> Any:
    return lazy_attribute(API, __name__, name)
