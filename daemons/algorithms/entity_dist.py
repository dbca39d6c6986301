"""The action distribution of an entity policy: categoricals over blocks of slots, each block one head's rows.

A block holds the logits [B, S, C] of S slots of the action vector (their places given by `slots`), already
masked: a slot with no entity, or one that does not act, allows only choice 0, so its log-probability and its
entropy are 0 and the actor's 0 there costs the loss nothing. Slots in no block (rows past the batch's most
entities) are 0 in every sample and count for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MASKED = -1e9  # a logit that is never chosen; finite, so a row of them still normalizes without NaN


@dataclass
class Block:
    logits: torch.Tensor  # [B, S, C], masked
    slots: torch.Tensor  # [S] int64: where these S choices go in the action vector


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
    """Independent categoricals over the blocks' slots of an action vector of `size` slots."""

    def __init__(self, blocks: list[Block], size: int):
        self.blocks, self.size = blocks, size
        self.logp = [torch.log_softmax(b.logits, dim=-1) for b in blocks]

    def _vector(self, picks: list[torch.Tensor]) -> torch.Tensor:
        rows = self.logp[0].shape[0] if self.logp else 0
        device = self.logp[0].device if self.logp else None
        out = torch.zeros(rows, self.size, dtype=torch.int64, device=device)
        for block, pick in zip(self.blocks, picks):
            out[:, block.slots] = pick
        return out

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Gumbel-max in each block: [B, size] int64."""
        picks = []
        for logp in self.logp:
            uniform = torch.rand(logp.shape, generator=generator, device=logp.device).clamp_(1e-12, 1.0 - 1e-7)
            picks.append((logp - torch.log(-torch.log(uniform))).argmax(dim=-1))
        return self._vector(picks)

    def mode(self) -> torch.Tensor:
        return self._vector([logp.argmax(dim=-1) for logp in self.logp])

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """actions [B, size] -> [B]: the sum over every block's slots."""
        total = torch.zeros(actions.shape[0], device=actions.device)
        for block, logp in zip(self.blocks, self.logp):
            chosen = actions[:, block.slots].clamp(0, logp.shape[-1] - 1)
            total = total + logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).sum(-1)
        return total

    def entropy(self) -> torch.Tensor:
        total = None
        for logp in self.logp:
            part = -(torch.where(logp > MASKED / 10, logp.exp() * logp, torch.zeros_like(logp))).sum((-1, -2))
            total = part if total is None else total + part
        return total

    def probs(self) -> list[torch.Tensor]:
        """Each block's probabilities [B, S, C] (tests and inspection)."""
        return [logp.exp() for logp in self.logp]
