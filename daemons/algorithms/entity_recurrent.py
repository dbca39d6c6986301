"""The entity policy with a recurrent core (`model.core = "lstm"` or `"gru"`): it remembers across steps.

Attention runs over each step's entities as in EntityActorCritic; the global token's output goes through an
LSTM or GRU cell carrying one state per env (the state travels and is reset as for every recurrent policy,
PROTOCOL.md 2.1.3), and the cell's output, brought back to the tokens' width, is added to every token before
the heads read them: each entity's choice, and the value, see what the core remembers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from torch import nn

from tandem.daemons.algorithms.entity_net import EntityActorCritic
from tandem.daemons.algorithms.recurrent import CELLS, core_step
from tandem.daemons.settings.schema import ModelSection
from tandem.protocol import keyed

if TYPE_CHECKING:
    from tandem.daemons.algorithms.unroll_tensors import UnrollTensors


class RecurrentEntityActorCritic(EntityActorCritic):
    recurrent = True

    def __init__(self, model_cfg: ModelSection, obs_space: gym.Space, action_space: gym.Space, algo_cfg: Any,
                 mask_size: int = 0):  # fmt: skip
        super().__init__(model_cfg, obs_space, action_space, algo_cfg, mask_size)
        self.kind, self.width = model_cfg.core, model_cfg.core_size
        self.state_size = model_cfg.core_state_size()
        self.core = CELLS[self.kind](model_cfg.entity_width, self.width)
        self.back = nn.Linear(self.width, model_cfg.entity_width)
        with torch.no_grad():
            for name, param in self.core.named_parameters():
                nn.init.orthogonal_(param) if name.startswith("weight") else nn.init.zeros_(param)

    def cell(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return core_step(self.core, self.kind, self.width, x, state)

    def outputs_after(self, tokens: torch.Tensor, core: torch.Tensor, obs, counts, rows):
        raw, value = self.read_heads(tokens + self.back(core).unsqueeze(1), rows)
        return self.distribution_of(raw, obs, counts, rows), value

    def distribution_step(self, obs, state: torch.Tensor):
        """An actor's step: (the distribution at obs, the state after the step)."""
        counts, rows = self.counted(obs)
        tokens = self.encode(obs, counts, rows)
        core, state = self.cell(tokens[:, 0], state.to(tokens.dtype))
        return self.outputs_after(tokens, core, obs, counts, rows)[0], state

    def evaluate_unroll(self, d: UnrollTensors, bootstrap: bool = True):
        """As RecurrentActorCritic.evaluate_unroll: the distribution at the T x N acted-on rows (t-major), the value
        at every row, then (with `bootstrap`) at each truncated episode's last observation."""
        steps, n = d.rewards.shape
        rows_t = steps + 1 if bootstrap else steps
        obs = keyed.flat(keyed.take(d.obs, slice(None, rows_t)))
        counts, rows = self.counted(obs)
        tokens = self.encode(obs, counts, rows)
        x = tokens[:, 0].reshape(rows_t, n, -1)
        state = d.core_state.to(x.dtype)
        outputs, states = [], []
        for r in range(rows_t):
            if r:  # obs[r] starts a new episode where step r-1 ended one
                state = state * (1.0 - d.ended[r - 1]).unsqueeze(1)
            h, state = self.cell(x[r], state)
            outputs.append(h)
            states.append(state)
        core = torch.stack(outputs).reshape(rows_t * n, -1)
        dist, values = self.outputs_after(tokens, core, obs, counts, rows)
        dist = dist.rows(steps * n)
        if bootstrap and keyed.row_count(d.finals):  # the step into a final observation, from the state before it
            f_counts, f_rows = self.counted(d.finals)
            f_tokens = self.encode(d.finals, f_counts, f_rows)
            f_core, _ = self.cell(f_tokens[:, 0], torch.stack(states)[d.final_t, d.final_n])
            values = torch.cat([values, self.outputs_after(f_tokens, f_core, d.finals, f_counts, f_rows)[1]])
        return dist, values
