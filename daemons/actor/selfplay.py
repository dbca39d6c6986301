"""An actor's self-play: each episode's opponent drawn from the learning policy's pool, played, and scored."""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np

from tandem.daemons.actor.link import PolicyLink
from tandem.daemons.actor.opponents import OpponentDraw, OpponentNets
from tandem.daemons.algorithms import make_policy
from tandem.daemons.algorithms.base import explore_with
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.envs.seats import SelfPlaySeats
from tandem.daemons.runtime.endpoints import learner_socket_options
from tandem.protocol import TransitionBatch
from tandem.protocol.transitions import MAX_GAMES

RECENT_GAMES = 200  # games the reported win rate is over


class SelfPlay:
    """Seats the learning policy in K worlds against opponents from its learner's pool (`poll` between ticks).

    Opponents are drawn by `selfplay.opponents` among the pooled versions, one every `games_per_draw` games,
    and each new episode plays one of the `active_opponents` drawn last (each distinct opponent in play costs
    one more batched inference per step: drawing per episode among 50 cut an actor's steps/s to a quarter). A
    drawn version this actor does not hold is fetched while the active ones play (the live weights until any is
    held)."""

    def __init__(self, config: RunConfig, ctx: Any, link: PolicyLink, requester: str, worlds: int, seed: int):
        sp = config.selfplay
        self.link, self.ctx, self.config, self.requester = link, ctx, config, requester
        self.draw_rule = OpponentDraw(sp.opponents, seed)
        self.endpoints = link.followed.endpoints
        self.make_net = lambda: make_policy(
            config, link.spaces.observation_space, link.spaces.action_space, seed=seed, mask_size=link.spaces.mask_size
        )
        self.nets = self.opponent_nets()
        self.last_good: int | None = None
        self.active: list[int] = []  # the versions new episodes are spread over, newest first
        self.incoming: int | None = None  # drawn, being fetched; joins `active` once held
        self.games_since_draw = sp.games_per_draw  # draw at the first episode
        self.rng = np.random.default_rng(seed)
        self.seats = SelfPlaySeats(link.policy_id, worlds, seed, self.draw, self.scored)
        self.recent: deque[float] = deque(maxlen=RECENT_GAMES)
        # results for the learner's ratings, sent with the next batch (PROTOCOL.md 2.1.6); the oldest go first
        # if no batch leaves for a long while
        self.unsent: deque[tuple[int, float]] = deque(maxlen=MAX_GAMES)
        self.counts = {"selfplay_games": 0, "selfplay_wins": 0, "selfplay_draws": 0, "selfplay_losses": 0}

    def opponent_nets(self) -> OpponentNets:
        config, endpoints = self.config, self.endpoints
        return OpponentNets(
            self.ctx,
            self.link.policy_id,
            endpoints.snapshot,
            self.requester,
            self.make_net,
            size=config.selfplay.opponent_nets,
            opts=learner_socket_options(config, endpoints),
        )

    def draw(self) -> int | None:
        """The next episode's opponent: one of the active versions held (None: the live weights)."""
        if self.games_since_draw >= self.config.selfplay.games_per_draw:
            self.games_since_draw = 0
            version = self.draw_rule.draw(self.link.followed.pool)
            if version is not None:
                self.incoming = version
        if self.incoming is not None:
            if self.nets.get(self.incoming) is not None:
                self.activate(self.incoming)
            else:
                self.nets.want(self.incoming)  # asked again on later draws until it comes (or is dropped)
        held = [v for v in self.active if self.nets.get(v) is not None]
        if not held:
            return self.last_good
        return int(held[self.rng.integers(len(held))])

    def activate(self, version: int) -> None:
        self.active = [version, *[v for v in self.active if v != version]][: self.config.selfplay.active_opponents]
        self.last_good, self.incoming = version, None

    def choose(self, version: int | None, obs: np.ndarray) -> np.ndarray:
        """Actions of `version`'s network (sampled as the actor samples; the live one where it is not held)."""
        net = self.nets.get(version) if version is not None else None
        if net is None and self.last_good is not None:
            net = self.nets.get(self.last_good)
        actions, _ = explore_with(net or self.link.net, obs, np.zeros(len(obs)), None)
        return actions

    def scored(self, version: int | None, score: float) -> None:
        self.games_since_draw += 1
        if version is not None:
            self.draw_rule.record(version, score)
        self.recent.append(score)
        self.unsent.append((-1 if version is None else version, score))
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
        """Take fetched opponents (never blocks); follow the learner if it moved."""
        if self.link.followed.endpoints != self.endpoints:
            self.endpoints = self.link.followed.endpoints
            old, self.nets = self.nets, self.opponent_nets()
            self.nets.nets, self.nets.counts = old.nets, old.counts
            old.close()
        loaded = self.nets.poll()
        if self.incoming in loaded:
            self.activate(self.incoming)
        elif loaded and self.last_good is None:
            self.last_good = loaded[-1]

    def counters(self) -> dict[str, float]:
        """Games and the learning side's recent score (a draw counts a half) for the heartbeat."""
        out: dict[str, float] = {**self.counts, **self.nets.counts, "opponents_held": len(self.nets.nets)}
        if self.recent:
            out["selfplay_win_rate"] = float(np.mean(self.recent))
        return out

    def close(self) -> None:
        self.nets.close()
