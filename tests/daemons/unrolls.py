"""Unrolls made the way an actor daemon makes them (a serial actor), and sent over the wire, for learner checks."""

from __future__ import annotations

from tandem.daemons.serial.parts import SerialActor
from tandem.protocol import TransitionBatch


def collect(config, count: int, weights=None) -> list[TransitionBatch]:
    """`count` consecutive unrolls of one serial actor (the actor daemon's stepping and policy), acting with
    `weights` (a learner's) where given."""
    actor = SerialActor(config)
    try:
        if weights is not None:
            actor.load(0, weights)
        out: list[TransitionBatch] = []
        while len(out) < count:
            out += actor.unrolls()
        return out[:count]
    finally:
        actor.close()


def wire(batch: TransitionBatch) -> TransitionBatch:
    """`batch` as a learner receives it: encoded to frames and decoded again."""
    return TransitionBatch.from_frames([bytes(f) for f in batch.to_frames()])
