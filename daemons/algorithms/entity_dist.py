"""The action distribution of an entity policy: categoricals over blocks of slots, each block one head's rows.

A block holds the logits [B, S, C] of S slots of the action vector (their places given by `slots`), already
masked: a slot with no entity, or one that does not act, allows only choice 0, so its log-probability and its
entropy are 0 and the actor's 0 there costs the loss nothing. Slots in no block (rows past the batch's most
entities) are 0 in every sample and count for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tandem.daemons.algorithms.distributions import HALF_LOG_2PI

MASKED = -1e9  # a logit that is never chosen; finite, so a row of them still normalizes without NaN


@dataclass
class Block:
    logits: torch.Tensor  # [B, S, C], masked
    slots: torch.Tensor  # [S] int64: where these S choices go in the action vector


@dataclass
class GaussBlock:
    """A Box head: independent normals over its dimensions (their log-probabilities those of the unclipped sample,
    which is what travels; the env step clips it to the bounds)."""

    mean: torch.Tensor  # [B, D]
    log_std: torch.Tensor  # [D]
    slots: torch.Tensor  # [D] int64


def forced(allowed: torch.Tensor) -> torch.Tensor:
    """[B, S] bool -> [B, S, 1] bool: the rows with no choice at all, which are forced to choice 0."""
    return (~allowed.any(-1)).unsqueeze(-1)


def masked_logits(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """logits [B, S, C] where `allowed` [B, S, C]; a row with nothing allowed may take choice 0 only."""
    first = torch.zeros_like(allowed)
    first[..., 0] = True
    allowed = allowed | (forced(allowed) & first)
    return logits.masked_fill(~allowed, MASKED)


class EntityDistribution:
    """Independent categoricals over the blocks' slots of an action vector of `size` slots, and normals over a
    Box head's (`gauss`): then the vector is float32, the choices of the others held as whole numbers."""

    def __init__(self, blocks: list[Block], size: int, gauss: list[GaussBlock] | None = None):
        self.blocks, self.size, self.gauss = blocks, size, gauss or []
        self.logp = [torch.log_softmax(b.logits, dim=-1) for b in blocks]

    def _vector(self, picks: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
        first = self.logp[0] if self.logp else self.gauss[0].mean
        dtype = torch.float32 if self.gauss else torch.int64
        out = torch.zeros(first.shape[0], self.size, dtype=dtype, device=first.device)
        for block, pick in zip([*self.blocks, *self.gauss], [*picks, *values]):
            out[:, block.slots] = pick.to(dtype)
        return out

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Gumbel-max in each block, a normal draw for each Box dimension: [B, size]."""
        picks = []
        for logp in self.logp:
            uniform = torch.rand(logp.shape, generator=generator, device=logp.device).clamp_(1e-12, 1.0 - 1e-7)
            picks.append((logp - torch.log(-torch.log(uniform))).argmax(dim=-1))
        values = [
            g.mean + torch.randn(g.mean.shape, generator=generator, device=g.mean.device) * g.log_std.exp()
            for g in self.gauss
        ]
        return self._vector(picks, values)

    def mode(self) -> torch.Tensor:
        return self._vector([logp.argmax(dim=-1) for logp in self.logp], [g.mean for g in self.gauss])

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """actions [B, size] -> [B]: the sum over every block's slots."""
        total = torch.zeros(actions.shape[0], device=actions.device)
        for block, logp in zip(self.blocks, self.logp):
            chosen = actions[:, block.slots].round().long().clamp(0, logp.shape[-1] - 1)
            total = total + logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).sum(-1)
        for g in self.gauss:
            z = (actions[:, g.slots].float() - g.mean) * torch.exp(-g.log_std)
            total = total + (-0.5 * z * z - g.log_std - HALF_LOG_2PI).sum(-1)
        return total

    def entropy(self) -> torch.Tensor:
        total = None
        for logp in self.logp:
            part = -(torch.where(logp > MASKED / 10, logp.exp() * logp, torch.zeros_like(logp))).sum((-1, -2))
            total = part if total is None else total + part
        for g in self.gauss:
            part = (0.5 + HALF_LOG_2PI + g.log_std).sum(-1).expand(g.mean.shape[0])
            total = part if total is None else total + part
        return total

    def rows(self, count: int) -> EntityDistribution:
        """The distribution at the first `count` rows."""
        blocks = [Block(b.logits[:count], b.slots) for b in self.blocks]
        return EntityDistribution(
            blocks, self.size, [GaussBlock(g.mean[:count], g.log_std, g.slots) for g in self.gauss]
        )

    def probs(self) -> list[torch.Tensor]:
        """Each block's probabilities [B, S, C] (tests and inspection)."""
        return [logp.exp() for logp in self.logp]
