"""Relative positions inside attention (model.entity_relpos): a learned key and value for each offset between two
entities, EntityGym's trainer's `relpos_encoding` on a grid.

Each pair (query entity, target entity) of one step gets the offset target - query of their position features
(model.entity_position), each axis divided by model.entity_relpos_scale, rounded and clipped to [-extent, extent];
the offset names a row of two tables. Its key row is dotted with the query (added to the attention logit) and its
value row, gated by the target, is added to what the query reads from the target. Every pair where either side
has no position (the global token, or a type with too few features) reads one more row, the same for all of them.
Only differences of positions enter, so moving every entity by the same amount changes nothing this part adds (up
to rounding, where positions are not whole numbers).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tandem.daemons.envs.entity_spaces import EntityLayout
from tandem.daemons.settings.setup_errors import SetupError

MAX_CELLS = 1 << 20  # offsets told apart: past this the tables outgrow the network they serve (and float sums)


class RelativePositions(nn.Module):
    """The tables and the gate, shared by every attention layer (as in RogueNet)."""

    def __init__(self, extent: list[int], head_width: int, width: int, scale: float = 1.0):
        super().__init__()
        strides, cells = [], 1
        for e in extent:
            strides.append(float(cells))
            cells *= 2 * e + 1
        self.cells = cells  # the one row every pair without a position reads comes after them
        self.scale = float(scale)
        self.register_buffer("extent", torch.tensor(extent, dtype=torch.float32), persistent=False)
        self.register_buffer("strides", torch.tensor(strides), persistent=False)
        self.keys = nn.Embedding(cells + 1, head_width)
        self.values = nn.Embedding(cells + 1, head_width)
        nn.init.normal_(self.keys.weight, std=0.05)  # RogueNet's scales: keys small, values larger
        nn.init.normal_(self.values.weight, std=0.2)
        self.gate = nn.Linear(width, head_width)

    def pair_rows(self, positions: torch.Tensor, placed: torch.Tensor) -> torch.Tensor:
        """[B, T, T] the table row of each (query, target) pair, from positions [B, T, P] and placed [B, T] (which
        tokens have a position). A pair whose offset is not a number (a non-finite position: the wire refuses
        them, a game in-process may not) reads the positionless row rather than an index out of the table."""
        offset = (positions.unsqueeze(1) - positions.unsqueeze(2)) / self.scale  # [b, q, t]: t's position - q's
        known = offset == offset  # False where NaN
        offset = torch.where(known, offset, torch.zeros_like(offset))
        clipped = torch.maximum(torch.minimum(offset.round(), self.extent), -self.extent)  # infinities clip too
        rows = ((clipped + self.extent) * self.strides).sum(-1).round().long()
        both = placed.unsqueeze(1) & placed.unsqueeze(2) & known.all(-1)
        return torch.where(both, rows, torch.full_like(rows, self.cells))

    def tables(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) [B, T, T, head_width] for the pairs' rows; computed once a pass, read by every layer."""
        return self.keys(rows), self.values(rows)

    def logits(self, q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """[B, H, T, T] what the pairs' keys add to the attention logits of queries q [B, H, T, D]."""
        return torch.einsum("bhqd,bqtd->bhqt", q, keys) / math.sqrt(keys.shape[-1])

    def read(self, att: torch.Tensor, x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """[B, H, T, D] what each query reads from the pairs' values under attention weights att [B, H, T, T], each
        target's value gated by that target's own input x [B, T, width]."""
        gate = torch.relu(self.gate(x))  # [B, T, D]: what the target lets through
        return torch.einsum("bhqt,bqtd->bhqd", att, values * gate.unsqueeze(1))


def positioned_types(layout: EntityLayout, position: list[int]) -> set[str]:
    """The names of the types wide enough to hold the position features (none where no position is named)."""
    return {t.name for t in layout.types if position and t.features > max(position)}


def check_relpos(layout: EntityLayout, extent: list[int], position: list[int], layers: int, attention: bool) -> None:
    """SetupError unless model.entity_relpos fits the model, the positions and the types: the attention policy, one
    extent a position feature, a type that holds them, and a layer of attention to add them to."""
    if not attention:
        raise SetupError("model.entity_relpos acts inside attention: it needs model.kind = 'auto', not 'mlp'")
    cells = math.prod(2 * e + 1 for e in extent)
    if cells > MAX_CELLS:
        raise SetupError(
            f"model.entity_relpos = {extent} tells {cells} offsets apart, more than {MAX_CELLS}: give smaller extents "
            "(model.entity_relpos_scale counts offsets in larger steps)"
        )
    if len(extent) != len(position):
        raise SetupError(
            f"model.entity_relpos = {extent} needs one extent for each feature model.entity_position names "
            f"({position}): give {len(position)}"
        )
    if not positioned_types(layout, position):
        names = ", ".join(f"{t.name!r} ({t.features})" for t in layout.types)
        raise SetupError(
            f"model.entity_relpos: no entity type holds the position features {position} (features: {names}); "
            "set model.entity_position to where the positions are"
        )
    if layers == 0:
        raise SetupError("model.entity_relpos acts inside attention layers: set model.entity_layers to 1 or more")
