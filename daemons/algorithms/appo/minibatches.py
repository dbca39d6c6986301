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

    def take(self, rows: torch.Tensor, buffers: RowBuffers | None = None) -> FlatSteps:
        """The steps at `rows`; with `buffers`, gathered into tensors reused from the last minibatch's take."""
        if buffers is None:
            return FlatSteps(**{f.name: keyed.take(getattr(self, f.name), rows) for f in fields(self)})
        return FlatSteps(**{f.name: buffers.take(f.name, getattr(self, f.name), rows) for f in fields(self)})

    @staticmethod
    def concat(parts: list[FlatSteps]) -> FlatSteps:
        if len(parts) == 1:
            return parts[0]
        return FlatSteps(**{f.name: cat_obs([getattr(p, f.name) for p in parts]) for f in fields(FlatSteps)})


class RowBuffers:
    """Where minibatch rows are gathered, kept from one minibatch to the next: a fresh tensor for each minibatch
    (7 MB of Atari stacks) costs as much again in page faults as the copy itself. A minibatch's tensors are
    overwritten by the next take, so each must be done with (its step taken) before the next is drawn."""

    def __init__(self):
        self.buffers: dict[str, torch.Tensor] = {}

    def take(self, name: str, data, rows: torch.Tensor):
        if keyed.is_keyed(data):
            return {key: self.take(f"{name}.{key}", value, rows) for key, value in data.items()}
        if not keyed.is_row_numbers(rows) or not data.is_contiguous():
            return keyed.take(data, rows)
        count = int(rows.shape[0])
        buffer = self.buffers.get(name)
        if (
            buffer is None
            or buffer.shape[0] < count
            or buffer.shape[1:] != data.shape[1:]
            or buffer.dtype != data.dtype
            or buffer.device != data.device
        ):
            buffer = self.buffers[name] = torch.empty((count, *data.shape[1:]), dtype=data.dtype, device=data.device)
        return torch.index_select(data, 0, rows, out=buffer[:count])


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
