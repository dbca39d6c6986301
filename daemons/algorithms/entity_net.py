"""The entity policy: per-type embeddings, a transformer over the entities of one step, and a head per action.

Each entity's features (with the step's global features beside them) are embedded by its type's own layer;
a global token joins them, and `model.entity_layers` layers of self-attention run over the entities present
(padding masked, so neither the bound nor the entities' order changes what the policy does: no positions are
embedded; model.entity_relpos adds the offsets between entities inside attention, entity_relpos.py). Heads: a
PerEntity head reads each actor's output row, a SelectEntity head scores every target row against each actor's
(scaled dot product), a Discrete head and the value read the global token. Each batch is
cut to the most entities any of its observations holds before attention, so a bound of 64 costs what the
entities present cost. `model.kind = "mlp"` gives the padded-and-flattened baseline instead: one MLP over every
padded row, the same heads and masks.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.distributions import ActionHead
from tandem.daemons.algorithms.entity_attention import AttentionBlock
from tandem.daemons.algorithms.entity_dist import Block, EntityDistribution, GaussBlock, masked_logits
from tandem.daemons.algorithms.entity_norm import GLOBAL_KEY, EntityFeatureNorm
from tandem.daemons.algorithms.entity_relpos import RelativePositions, check_relpos, positioned_types
from tandem.daemons.algorithms.net_parts import mlp
from tandem.daemons.envs.entity_spaces import ACTORS, GLOBAL, MASK, TARGETS, EntityLayout, Head, padded_layout
from tandem.daemons.settings.schema import ModelSection
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol.ragged import COUNT_PREFIX

TAU = 2.0 * math.pi


def embedding(inputs: int, width: int) -> nn.Linear:
    """A type's embedding layer; a type with no features (and no global ones) is embedded as its bias alone, a
    learned token of the type (without torch's warning that a [width, 0] weight has nothing to initialize)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")
        return nn.Linear(inputs, width)


class EntityActorCritic(nn.Module):
    """An actor-critic over entity observations (the fixed-shape form) and an EntityActionSpace."""

    recurrent = False
    shared = True  # one network gives the policy and the value
    images = False

    def __init__(self, model_cfg: ModelSection, obs_space: gym.Space, action_space: gym.Space, algo_cfg: Any,
                 mask_size: int = 0):  # fmt: skip
        super().__init__()
        self.layout: EntityLayout = padded_layout(obs_space, action_space)
        self.head = ActionHead(action_space)  # the wire form: slots of a MultiDiscrete
        self.attention = model_cfg.kind != "mlp"
        self.trim = True  # cut each batch to its most entities (an ONNX export keeps every padded row: fixed shapes)
        self.origin, self.position = model_cfg.entity_origin, list(model_cfg.entity_position)
        self.heading = model_cfg.entity_heading  # -1: positions are not turned
        check_origin(self.layout, self.origin, self.position, self.heading)
        if model_cfg.entity_relpos:
            check_relpos(self.layout, list(model_cfg.entity_relpos), self.position, model_cfg.entity_layers,
                         self.attention)  # fmt: skip
        self.type_index = {t.name: i for i, t in enumerate(self.layout.types)}
        # the types wide enough to hold the position features: only their positions are moved, turned or compared
        self.positioned = positioned_types(self.layout, self.position)
        for i, t in enumerate(self.layout.types):  # constants that put each type's positions (and heading) in place
            eye = torch.eye(t.features)
            moved = eye[self.position] if t.name in self.positioned else eye[:0]
            self.register_buffer(f"place_{i}", moved, persistent=False)
            if self.heading >= 0 and t.name == self.origin:
                self.register_buffer(f"heading_{i}", eye[self.heading], persistent=False)
        width = model_cfg.entity_width
        layout = self.layout
        g = layout.global_size
        self.obs_norm: EntityFeatureNorm | None = None  # algorithm.normalize_obs (attention only)
        if self.attention:
            self.embed = nn.ModuleDict({str(i): embedding(t.features + g, width) for i, t in enumerate(layout.types)})
            self.global_token = nn.Linear(g, width) if g else None
            self.start = nn.Parameter(torch.zeros(width))
            self.layers = nn.ModuleList(
                AttentionBlock(width, model_cfg.entity_heads) for _ in range(model_cfg.entity_layers)
            )
            self.norm = nn.LayerNorm(width)
            self.relpos: RelativePositions | None = None  # model.entity_relpos
            if model_cfg.entity_relpos:
                self.relpos = RelativePositions(
                    list(model_cfg.entity_relpos), width // model_cfg.entity_heads, width, model_cfg.entity_relpos_scale
                )
            if getattr(algo_cfg, "normalize_obs", False):
                self.obs_norm = EntityFeatureNorm([t.features for t in layout.types], g)
            self.outputs = nn.ModuleDict()
            for h in layout.heads:
                if h.kind == "select":
                    self.outputs[h.name] = nn.ModuleList([nn.Linear(width, width), nn.Linear(width, width)])
                else:  # a categorical head's choices, a global head's, a Box head's means
                    self.outputs[h.name] = nn.Linear(width, h.choices)
            self.value_out = nn.Linear(width, 1)
        else:
            inputs = sum(t.bound * t.features + 1 for t in layout.types) + g
            self.flat_sizes = [
                h.choices * (h.slots if h.kind in ("categorical", "select") else 1) for h in layout.heads
            ]
            self.flat_sizes.append(1)  # the value
            hidden = [int(s) for s in model_cfg.hidden_sizes]
            self.flat = mlp(inputs, sum(self.flat_sizes), hidden, model_cfg.activation)
        # a Box head's log standard deviations: learned, one a dimension, as the Gaussian policy of a Box space
        init = float(getattr(algo_cfg, "log_std_init", 0.0))
        self.log_std = nn.ParameterDict(
            {h.name: nn.Parameter(torch.full((h.choices,), init)) for h in layout.heads if h.kind == "box"}
        )

    # ------------------------------------------------------------------ what the algorithms call

    def distribution(self, obs: dict[str, torch.Tensor]) -> EntityDistribution:
        return self.forward_all(obs)[0]

    def greedy(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.forward_all(obs)[0].mode()

    def values(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.forward_all(obs)[1]

    def evaluate(self, obs: dict[str, torch.Tensor], policy_rows: int):
        """The distribution at the first `policy_rows` observations, the value at every one, in one pass."""
        dist, values = self.forward_all(obs)
        if policy_rows < values.shape[0]:
            dist = dist.rows(policy_rows)
        return dist, values

    @torch.no_grad()
    def update_obs_norm(self, obs: dict[str, torch.Tensor], chunk_rows: int = 256) -> None:
        """Folds the features of the entities present in observations [R, ...] (positions as `encode` sees them,
        relative to the origin) into the statistics, with algorithm.normalize_obs. (`chunk_rows` is the image
        path's: entity rows are small, so they fold in one pass.)"""
        if self.obs_norm is None:
            return
        counts, rows = self.counted(obs)
        g = obs[GLOBAL].float() if self.layout.global_size else None
        origin = self.origin_of(obs, g)
        for i, t in enumerate(self.layout.types):
            x = self.features_of(obs, t, rows[t.name], origin)
            present = torch.arange(x.shape[1], device=x.device) < counts[t.name].unsqueeze(1)
            self.obs_norm.fold(str(i), x[present])
        if g is not None:
            self.obs_norm.fold(GLOBAL_KEY, g)

    def check_actions(self, obs: dict[str, np.ndarray], actions: np.ndarray) -> None:
        """ValueError unless an unroll's actions [T, K, slots] fit its observations: 0 in every slot of an entity
        that is not there, and a select head's values naming one of the step's present targets."""
        counts = {t.name: obs[f"{COUNT_PREFIX}{t.name}"][: actions.shape[0]] for t in self.layout.types}
        for head in self.layout.heads:
            if head.kind in ("global", "box"):
                continue
            slots = np.rint(actions[..., head.offset : head.offset + head.slots]).astype(np.int64)
            present = np.concatenate(
                [np.arange(self.layout.type(n).bound) < counts[n][..., None] for n in head.actors], axis=-1
            )
            if (slots[~present] != 0).any():
                raise ValueError(f"actions: head {head.name!r} has a choice for an entity that is not there")
            if head.kind == "select":
                targets = sum(counts[n] for n in head.targets)[..., None]
                if ((slots >= np.maximum(targets, 1)) & present).any():
                    raise ValueError(f"actions: head {head.name!r} selects an entity that is not there")

    # ------------------------------------------------------------------ the network

    def forward_all(self, obs: dict[str, torch.Tensor]) -> tuple[EntityDistribution, torch.Tensor]:
        counts, rows = self.counted(obs)
        if self.attention:
            raw, value = self.read_heads(self.encode(obs, counts, rows), rows)
        else:
            raw, value = self.flat_outputs(obs, counts)
        return self.distribution_of(raw, obs, counts, rows), value

    def distribution_of(self, raw, obs, counts, rows) -> EntityDistribution:
        """The heads' outputs under their masks, as one distribution over the action vector."""
        heads = self.layout.heads
        blocks = [self.block(h, raw[h.name], obs, counts, rows) for h in heads if h.kind != "box"]
        gauss = [
            GaussBlock(
                raw[h.name], self.log_std[h.name], torch.arange(h.offset, h.offset + h.slots, device=value_device(raw))
            )
            for h in heads
            if h.kind == "box"
        ]
        return EntityDistribution(blocks, sum(h.slots for h in heads), gauss)

    def counted(self, obs) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
        """Each type's counts [B], and the rows it is cut to: the most a row of this batch holds (with attention;
        the MLP takes every padded row)."""
        layout = self.layout
        counts = {t.name: obs[f"{COUNT_PREFIX}{t.name}"].reshape(-1).long() for t in layout.types}
        if not self.attention or not self.trim:
            return counts, {t.name: t.bound for t in layout.types}
        # at least one row a type (padding, masked): a head over a type no row holds still has a column to mask
        return counts, {
            t.name: max(1, int(counts[t.name].max()) if counts[t.name].numel() else 0) for t in layout.types
        }

    def encode(self, obs, counts, rows) -> torch.Tensor:
        """The tokens after attention [B, 1 + rows, width]: the global token first, then each type's rows."""
        layout = self.layout
        batch = next(iter(obs.values())).shape[0]
        g = obs[GLOBAL].float() if layout.global_size else None
        origin = self.origin_of(obs, g)  # from the global features as they are (positions, not statistics)
        norm = self.obs_norm
        if norm is not None and g is not None:
            g = norm.scaled(GLOBAL_KEY, g)
        tokens = [self.start.expand(batch, 1, -1)]
        if self.global_token is not None:
            tokens[0] = tokens[0] + self.global_token(g).unsqueeze(1)
        pads = [torch.zeros(batch, 1, dtype=torch.bool, device=self.start.device)]
        relpos = self.relpos
        if relpos is not None:  # the global token's position (it has none)
            places, placed = [self.start.new_zeros(batch, 1, len(self.position))], [pads[0]]
        for i, t in enumerate(layout.types):
            n = rows[t.name]
            x = self.features_of(obs, t, n, origin)
            if relpos is not None:  # this type's positions (after the origin), or none where it has too few
                has = t.name in self.positioned
                places.append(x[..., self.position] if has else x.new_zeros(batch, n, len(self.position)))
                placed.append((torch.ones if has else torch.zeros)(batch, n, dtype=torch.bool, device=x.device))
            if norm is not None:
                x = norm.scaled(str(i), x)
            if g is not None:
                x = torch.cat([x, g.unsqueeze(1).expand(batch, n, -1)], dim=-1)
            tokens.append(self.embed[str(i)](x))
            pads.append(torch.arange(n, device=x.device) >= counts[t.name].unsqueeze(1))
        h, keep = torch.cat(tokens, 1), ~torch.cat(pads, 1)
        pairs = None
        if relpos is not None:
            pairs = relpos.tables(relpos.pair_rows(torch.cat(places, 1), torch.cat(placed, 1)))
        for layer in self.layers:
            h = layer(h, keep, relpos, pairs)
        return self.norm(h)

    def features_of(self, obs, t, n: int, origin: torch.Tensor | None) -> torch.Tensor:
        """Type t's first n rows [B, n, features] as floats, positions relative to the origin where one is set (and
        turned by its heading, model.entity_heading)."""
        x = obs[t.name][:, :n].float()
        if origin is None or t.name not in self.positioned:
            return x
        rel = x[..., self.position] - origin[:, None, : len(self.position)]
        if self.heading >= 0:  # into the origin's own frame: its heading becomes +x
            heading = origin[:, None, -1:]
            cos, sin = heading.cos(), heading.sin()
            rel = torch.cat([rel[..., :1] * cos + rel[..., 1:] * sin, rel[..., 1:] * cos - rel[..., :1] * sin], -1)
        # the new positions put in their places by products with 0/1 constants, not by indexed writes (which an
        # ONNX export turns into a graph ONNX Runtime refuses)
        i = self.type_index[t.name]
        place = getattr(self, f"place_{i}")
        x = x * (1.0 - place.sum(0)) + (rel.unsqueeze(-1) * place).sum(-2)  # a sum of exact terms on any backend
        if self.heading >= 0 and t.name == self.origin:  # headings of the origin's type, as the origin's own
            turn = x[..., self.heading : self.heading + 1] - heading
            turn = turn - TAU * torch.floor((turn + math.pi) / TAU)  # into [-pi, pi): the same turn either side of 0
            x = x + (turn - x[..., self.heading : self.heading + 1]) * getattr(self, f"heading_{i}")
        return x

    def origin_of(self, obs, g: torch.Tensor | None) -> torch.Tensor | None:
        """[B, P] (then its heading, with model.entity_heading): where positions are measured from
        (model.entity_origin), or None to take them as they are."""
        if not self.origin:
            return None
        places = [*self.position, *([self.heading] if self.heading >= 0 else [])]
        # the first entity of the type (zeros when none), or the global features
        return g[:, places] if self.origin == GLOBAL else obs[self.origin][:, 0, places].float()

    def read_heads(self, h: torch.Tensor, rows) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Each head's logits (before masks) and the value, from the tokens `encode` gave."""
        layout = self.layout
        start, by_type = 1, {}
        for t in layout.types:
            by_type[t.name] = h[:, start : start + rows[t.name]]
            start += rows[t.name]
        raw: dict[str, torch.Tensor] = {}
        for head in layout.heads:
            if head.kind in ("global", "box"):
                raw[head.name] = self.outputs[head.name](h[:, 0])
                continue
            actors = torch.cat([by_type[name] for name in head.actors], 1)
            if head.kind == "categorical":
                raw[head.name] = self.outputs[head.name](actors)
            else:
                query, key = self.outputs[head.name]
                targets = torch.cat([by_type[name] for name in head.targets], 1)
                raw[head.name] = query(actors) @ key(targets).transpose(1, 2) / math.sqrt(actors.shape[-1])
        return raw, self.value_out(h[:, 0]).squeeze(-1)

    def flat_outputs(self, obs, counts) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        layout = self.layout
        parts = []
        for t in layout.types:
            parts += [obs[t.name].float().flatten(1), counts[t.name].float().unsqueeze(1) / t.bound]
        if layout.global_size:
            parts.append(obs[GLOBAL].float())
        out = torch.split(self.flat(torch.cat(parts, 1)), self.flat_sizes, dim=1)
        raw = {
            h.name: o.reshape(o.shape[0], h.slots, h.choices) if h.kind in ("categorical", "select") else o
            for h, o in zip(layout.heads, out)
        }
        return raw, out[-1].squeeze(-1)

    # ------------------------------------------------------------------ masks

    def type_rows(self, types, obs, key: str | None, counts, rows) -> tuple[torch.Tensor, torch.Tensor]:
        """For `types` one after another: [B, R] bool of the rows present (and allowed by the mask under `key`,
        given over the padded rows), and [R] their places among the padded rows."""
        present, places, start = [], [], 0
        for name in types:
            n, bound = rows[name], self.layout.type(name).bound
            here = torch.arange(n, device=counts[name].device)
            ok = here < counts[name].unsqueeze(1)
            if key is not None and key in obs:
                ok = ok & obs[key][:, start : start + n].bool()
            present.append(ok)
            places.append(start + here)
            start += bound
        return torch.cat(present, 1), torch.cat(places)

    def block(self, head: Head, raw: torch.Tensor, obs, counts, rows) -> Block:
        device = raw.device
        if head.kind == "global":
            allowed = torch.ones_like(raw, dtype=torch.bool)
            if f"{MASK}{head.name}" in obs:
                allowed = obs[f"{MASK}{head.name}"].bool()
            slots = torch.tensor([head.offset], device=device)
            return Block(masked_logits(raw, allowed).unsqueeze(1), slots)
        acting, places = self.type_rows(head.actors, obs, f"{ACTORS}{head.name}", counts, rows)
        slots = head.offset + places
        if head.kind == "categorical":
            allowed = acting.unsqueeze(-1).expand_as(raw)
            mask = obs.get(f"{MASK}{head.name}")
            if mask is not None:
                allowed = allowed & mask[:, places].bool()
            return Block(masked_logits(raw, allowed), slots)
        # select: a target is named by its place among the step's present targets, so the targets' columns are
        # put in that order (present ones first, in type order) before the mask and the softmax
        present, _ = self.type_rows(head.targets, obs, None, counts, rows)
        allowed_targets, _ = self.type_rows(head.targets, obs, f"{TARGETS}{head.name}", counts, rows)
        columns = present.shape[1]
        key = (~present).long() * columns + torch.arange(columns, device=present.device)  # distinct: a stable sort
        order = torch.topk(key, columns, dim=1, largest=False).indices  # (topk, not argsort: ONNX exports it)
        logits = raw.gather(2, order.unsqueeze(1).expand_as(raw))
        allowed = acting.unsqueeze(-1) & allowed_targets.gather(1, order).unsqueeze(1)
        return Block(masked_logits(logits, allowed), slots)


def value_device(raw: dict[str, torch.Tensor]) -> torch.device:
    return next(iter(raw.values())).device


def check_origin(layout: EntityLayout, origin: str, position: list[int], heading: int = -1) -> None:
    """SetupError unless model.entity_origin names a type (or 'global') holding the features entity_position (and
    entity_heading) name."""
    if not origin:
        if heading >= 0:
            raise SetupError(
                "model.entity_heading needs model.entity_origin: the entity (or 'global') it is the heading of"
            )
        return
    if heading >= 0 and len(position) != 2:
        raise SetupError(
            "model.entity_heading turns positions in a plane: model.entity_position must name two features, "
            f"not {position}"
        )
    if not position:
        raise SetupError("model.entity_position: name the position features (e.g. [0, 1]) for model.entity_origin")
    if origin == GLOBAL:
        width = layout.global_size
    elif origin in {t.name for t in layout.types}:
        width = layout.type(origin).features
    else:
        names = ", ".join(["'global'", *(repr(t.name) for t in layout.types)])
        raise SetupError(f"model.entity_origin = {origin!r} is not an entity type or 'global' (here: {names})")
    if max(position) >= width:
        raise SetupError(
            f"model.entity_position = {position}: {origin!r} has {width} features, so positions must be below {width}"
        )
    if heading in position:
        raise SetupError(f"model.entity_heading = {heading} is one of model.entity_position {position}: name another")
    if heading >= width:
        raise SetupError(
            f"model.entity_heading = {heading}: {origin!r} has {width} features, so the heading must be below {width}"
        )
