"""An update's steps laid flat with the targets computed once (PPO's form), and the minibatches drawn from them."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from tandem.daemons.algorithms.torch_util import cat_obs
from tandem.protocol import keyed


@dataclass
class FlatSteps:
    """M steps of one update: what each minibatch step needs, with V-trace's targets fixed at the update's start."""

    obs: torch.Tensor  # [M, ...] the observations acted on (a dict of them for a Dict observation)
    actions: torch.Tensor  # [M, ...] in the action head's form
    behaviour_logp: torch.Tensor  # [M] log mu(a|x) of the acting version
    start_logp: torch.Tensor  # [M] log pi(a|x) of the weights the update starts from (the proximal policy)
    advantages: torch.Tensor  # [M] V-trace policy-gradient advantages (not yet normalized)
    targets: torch.Tensor  # [M] value targets, in the units of the value output
    old_values: torch.Tensor  # [M] value outputs before the update (value clipping's anchor)
    streams: torch.Tensor  # [M] which env column each step came from (minibatches of whole unrolls)

    @property
    def size(self) -> int:
        return int(self.behaviour_logp.shape[0])

    def take(self, rows: torch.Tensor) -> FlatSteps:
        return FlatSteps(**{f.name: keyed.take(getattr(self, f.name), rows) for f in fields(self)})

    @staticmethod
    def concat(parts: list[FlatSteps]) -> FlatSteps:
        if len(parts) == 1:
            return parts[0]
        return FlatSteps(**{f.name: cat_obs([getattr(p, f.name) for p in parts]) for f in fields(FlatSteps)})


def minibatch_rows(flat: FlatSteps, count: int, by: str, generator: torch.Generator) -> list[torch.Tensor]:
    """Row indices of `count` minibatches covering every step once: single steps shuffled ('steps') or whole
    env columns shuffled ('unrolls', each column's steps kept together)."""
    device = flat.streams.device
    if by == "steps":
        order = torch.randperm(flat.size, generator=generator).to(device)
        return list(torch.chunk(order, min(count, flat.size)))
    columns = torch.unique(flat.streams)
    order = columns[torch.randperm(len(columns), generator=generator).to(device)]
    return [
        torch.nonzero(torch.isin(flat.streams, chunk)).squeeze(1)
        for chunk in torch.chunk(order, min(count, len(columns)))
    ]
