"""An actor's self-play: each episode's opponent drawn from the pools of the policies it plays against, and scored."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tandem.daemons.acting.link import FollowedPolicy, PolicyLink
from tandem.daemons.actor.opponents import OpponentDraw, OpponentNets
from tandem.daemons.algorithms import make_policy
from tandem.daemons.algorithms.base import act_with, explore_with
from tandem.daemons.config.policies import policy_config
from tandem.daemons.config.selfplay import draw_rule, opponent_pools
from tandem.daemons.envs.fixed_players import fixed_player
from tandem.daemons.envs.seats import SelfPlaySeats
from tandem.daemons.runtime.endpoints import learner_socket_options
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch
from tandem.protocol.transitions import MAX_GAMES

RECENT_GAMES = 200  # games the reported win rate is over

# An opponent: (policy, pooled version) of one of the pools drawn from; None: the learning policy's live weights
# (before any pool holds a version); SCRIPTED: selfplay.scripted_opponent
Opponent = tuple[str, int]
SCRIPTED = "scripted"


def wire_game(learning: str, opponent: Opponent | None, score: float) -> tuple:
    """A game as PROTOCOL.md 2.1.6 carries it: [version, score], with the opponent's policy when it is not the
    learning policy's own; -1 for the live weights."""
    if opponent is None:
        return (-1, score)
    policy, version = opponent
    return (version, score) if policy == learning else (version, score, policy)


@dataclasses.dataclass
class PoolSource:
    """One policy whose pool opponents are drawn from: its followed weights (they list the pool) and the pooled
    versions loaded from its learner's snapshot socket."""

    policy: str
    followed: FollowedPolicy
    nets: OpponentNets
    own: bool  # the learning policy's own pool (its weights are polled by the actor's loop, not here)


class SelfPlay:
    """Seats the learning policy in K worlds against opponents from pools (`poll` between ticks).

    The pools are the learning policy's own (plain self-play) or, in a league (`[selfplay.league]`), those of the
    policies its entry names. Opponents are drawn by the policy's rule among every version those pools list, one
    every `games_per_draw` games, and each new episode plays one of the `active_opponents` drawn last (each
    distinct opponent in play costs one more batched inference per step: drawing per episode among 50 cut an
    actor's steps/s to a quarter). A drawn version this actor does not hold is fetched while the active ones play
    (the live weights until any is held). With `selfplay.scripted_share`, that share of new episodes is played
    against a fixed player instead: those games are counted apart and not sent for rating (it has no version)."""

    def __init__(
        self,
        config: RunConfig,
        ctx: Any,
        link: PolicyLink,
        requester: str,
        worlds: int,
        seed: int,
        watch: Callable[[str], FollowedPolicy] | None = None,
    ):
        sp, policy = config.selfplay, link.policy_id
        self.link, self.ctx, self.config, self.requester, self.seed = link, ctx, config, requester, seed
        self.draw_rule = OpponentDraw(draw_rule(config, policy), seed)
        self.sources: dict[str, PoolSource] = {}
        for source in opponent_pools(config, policy):
            own = source == policy
            if not own and watch is None:
                raise ValueError(f"policy {policy!r} draws from the pool of {source!r}: its weights must be watched")
            followed = link.followed if own else watch(source)
            self.sources[source] = PoolSource(source, followed, self.opponent_nets(source, followed), own)
        self.last_good: Opponent | None = None
        self.active: list[Opponent] = []  # the opponents new episodes are spread over, newest first
        self.incoming: Opponent | None = None  # drawn, being fetched; joins `active` once held
        self.games_since_draw = sp.games_per_draw  # draw at the first episode
        self.rng = np.random.default_rng(seed)
        self.seats = SelfPlaySeats(policy, worlds, seed, self.draw, self.scored)
        self.recent: deque[float] = deque(maxlen=RECENT_GAMES)
        # results for the learner's ratings, sent with the next batch (PROTOCOL.md 2.1.6); the oldest go first
        # if no batch leaves for a long while
        self.unsent: deque[tuple] = deque(maxlen=MAX_GAMES)
        self.counts = {"selfplay_games": 0, "selfplay_wins": 0, "selfplay_draws": 0, "selfplay_losses": 0}
        self.scripted = None  # selfplay.scripted_opponent, where it plays a share of the games
        self.scripted_recent: deque[float] = deque(maxlen=RECENT_GAMES)
        if sp.scripted_opponent and sp.scripted_share > 0:
            actions = int(getattr(link.spaces.action_space, "n", 0))
            self.scripted = fixed_player(
                sp.scripted_opponent, link.spaces.mask_size, actions, seed, key="selfplay.scripted_opponent"
            )
            self.counts.update(selfplay_scripted_games=0, selfplay_scripted_wins=0)

    def opponent_nets(self, policy: str, followed: FollowedPolicy) -> OpponentNets:
        pconf, spaces = policy_config(self.config, policy), self.link.spaces

        def make_net() -> Any:  # a network of the pool's policy (its own [model]), for the learning seat's spaces
            obs, act = spaces.observation_space, spaces.action_space
            return make_policy(pconf, obs, act, seed=self.seed, mask_size=spaces.mask_size)

        return OpponentNets(
            self.ctx,
            policy,
            followed.endpoints.snapshot,
            self.requester,
            make_net,
            size=self.config.selfplay.opponent_nets,
            opts=learner_socket_options(pconf, followed.endpoints),
        )

    def held(self, opponent: Opponent) -> Any | None:
        policy, version = opponent
        source = self.sources.get(policy)
        return source.nets.get(version) if source is not None else None

    def candidates(self) -> list[Opponent]:
        """Every pooled version of every source, as their newest weights list them."""
        return [(policy, int(v)) for policy, source in self.sources.items() for v in source.followed.pool]

    def draw(self) -> Opponent | str | None:
        """The next episode's opponent: SCRIPTED for its share, else one of the active ones held (None: the live
        weights)."""
        if self.scripted is not None and self.rng.random() < self.config.selfplay.scripted_share:
            return SCRIPTED
        if self.games_since_draw >= self.config.selfplay.games_per_draw:
            self.games_since_draw = 0
            opponent = self.draw_rule.draw(self.candidates())
            if opponent is not None:
                self.incoming = opponent
        if self.incoming is not None:
            if self.held(self.incoming) is not None:
                self.activate(self.incoming)
            else:
                policy, version = self.incoming
                self.sources[policy].nets.want(version)  # asked again on later draws until it comes (or is dropped)
        held = [o for o in self.active if self.held(o) is not None]
        if not held:
            return self.last_good
        return held[self.rng.integers(len(held))]

    def activate(self, opponent: Opponent) -> None:
        kept = [o for o in self.active if o != opponent]
        self.active = [opponent, *kept][: self.config.selfplay.active_opponents]
        self.last_good, self.incoming = opponent, None

    def choose(self, opponent: Opponent | str | None, obs: np.ndarray) -> np.ndarray:
        """Actions of `opponent`'s network (the live one where it is not held), sampled as the actor samples or,
        with `selfplay.opponent_moves = "greedy"`, its most likely ones; or of the scripted player."""
        if opponent == SCRIPTED:
            return np.asarray(self.scripted(obs))
        net = self.held(opponent) if opponent is not None else None
        if net is None and self.last_good is not None:
            net = self.held(self.last_good)
        net = net or self.link.net
        if self.config.selfplay.opponent_moves == "greedy":
            return np.asarray(act_with(net, obs, np.zeros(len(obs)), None))
        actions, _ = explore_with(net, obs, np.zeros(len(obs)), None)
        return actions

    def scored(self, opponent: Opponent | str | None, score: float) -> None:
        if opponent == SCRIPTED:
            self.scripted_recent.append(score)
            self.counts["selfplay_scripted_games"] += 1
            self.counts["selfplay_scripted_wins"] += score == 1.0
            return
        self.games_since_draw += 1
        if opponent is not None:
            self.draw_rule.record(opponent, score)
        self.recent.append(score)
        self.unsent.append(wire_game(self.link.policy_id, opponent, score))
        self.counts["selfplay_games"] += 1
        self.counts[{1.0: "selfplay_wins", 0.5: "selfplay_draws", 0.0: "selfplay_losses"}[score]] += 1

    def attach_games(self, outbox: list[TransitionBatch]) -> None:
        """The games not yet reported ride on the first of the learning policy's batches about to be sent."""
        if not self.unsent:
            return
        for i, batch in enumerate(outbox):
            if batch.policy_id == self.link.policy_id:
                outbox[i] = dataclasses.replace(batch, games=tuple(self.unsent))
                self.unsent.clear()
                return

    def poll(self) -> None:
        """Take fetched opponents and the other pools' newest lists (never blocks); follow learners that moved."""
        for source in self.sources.values():
            if not source.own:
                source.followed.poll()
            if source.nets.snapshot_endpoint != source.followed.endpoints.snapshot:
                old, source.nets = source.nets, self.opponent_nets(source.policy, source.followed)
                source.nets.nets, source.nets.counts = old.nets, old.counts
                old.close()
            for version in source.nets.poll():
                opponent = (source.policy, version)
                if opponent == self.incoming:
                    self.activate(opponent)
                elif self.last_good is None:
                    self.last_good = opponent

    def counters(self) -> dict[str, float]:
        """Games and the learning side's recent score (a draw counts a half) for the heartbeat."""
        out: dict[str, float] = dict(self.counts)
        held = 0
        for source in self.sources.values():
            for key, value in source.nets.counts.items():
                out[key] = out.get(key, 0) + value
            held += len(source.nets.nets)
        out["opponents_held"] = held
        if self.recent:
            out["selfplay_win_rate"] = float(np.mean(self.recent))
        if self.scripted_recent:
            out["selfplay_scripted_win_rate"] = float(np.mean(self.scripted_recent))
        return out

    def close(self) -> None:
        for source in self.sources.values():
            source.nets.close()
