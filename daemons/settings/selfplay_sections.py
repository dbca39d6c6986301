"""[selfplay] and its league members ([selfplay.league.NAME]): opponents drawn from a policy's own past."""

from __future__ import annotations

from dataclasses import dataclass

from tandem.daemons.settings.option import option


@dataclass
class LeagueMemberSection:
    """[selfplay.league.NAME]: a policy that learns by playing in the league, and whose pools its opponents come from."""

    opponents_from: list[str] = option(
        [],
        "Policies whose pools this policy's opponents are drawn from (each needs learner.pool_every > 0); empty: its own pool only.",
    )
    opponents: str = option(
        "",
        "How this policy's opponents are drawn: 'latest', 'uniform' or 'prioritized'; empty: selfplay.opponents.",
        choices=("", "latest", "uniform", "prioritized"),
    )
    actors: int = option(1, "How many of the run's actors play this policy's learning seat.", min=1)


@dataclass
class SelfPlaySection:
    """[selfplay]: a policy plays against pooled earlier versions of itself in multi-agent games."""

    enabled: bool = option(
        False,
        "In each game one seat (drawn anew per episode) plays the learning policy and is trained on; every other seat it plays is an opponent drawn from its learner's pool (learner.pool_every > 0).",
    )
    policy: str = option(
        "",
        "The learning policy (a name under [policies]); empty: the run's first policy. With a league: the member the evaluator measures (empty: the first).",
    )
    opponents: str = option(
        "prioritized",
        "How an episode's opponent is drawn from the pool: 'latest', 'uniform', or 'prioritized' (those the learning side loses to most, often).",
        choices=("latest", "uniform", "prioritized"),
    )
    opponent_moves: str = option(
        "sampled",
        "How a pooled opponent picks its moves: 'sampled' from its policy, as the learning seat does, or 'greedy' (its most likely move, as the evaluator plays): a past version then always plays what it knew, so a threat or a win left open is punished whenever that version saw it.",
        choices=("sampled", "greedy"),
    )
    opponent_nets: int = option(
        8, "Pooled versions an actor holds loaded at once (least recently used dropped first).", min=1, max=1024
    )
    active_opponents: int = option(
        1,
        "Pooled versions an actor's new episodes are spread over at a time: each distinct opponent costs one more batched inference per step (2 cost 20% of an actor's steps/s on Connect Four).",
        min=1,
        max=64,
    )
    games_per_draw: int = option(
        256,
        "Games an actor plays before it draws the next opponent (by `opponents`) to replace its oldest active one.",
        min=1,
    )
    league: dict[str, LeagueMemberSection] = option(
        {},
        "Several learning policies sharing pools (an AlphaStar-style league): one table per learning policy, which plays every seat its agents patterns match; actors are split among them in this order. Empty: selfplay.policy alone.",
    )
    eval_opponent: str = option(
        "random",
        "Whom the evaluator's greedy learning policy plays, its return being the win rate (a draw counts half): 'random' (a uniformly random legal action) or 'module:callable' (observations [B, D] -> B actions).",
    )
    scripted_opponent: str = option(
        "",
        "A fixed player mixed into the training games: 'random' or 'module:callable' (as eval_opponent); its games are counted apart and not rated. Empty: none.",
    )
    scripted_share: float = option(
        0.0,
        "Share of new episodes in which selfplay.scripted_opponent plays the opponents' seats instead of a pooled version.",
        min=0.0,
        max=1.0,
    )
