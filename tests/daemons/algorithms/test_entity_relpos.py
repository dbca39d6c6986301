"""Relative positions inside the entity policy's attention (model.entity_relpos): which table row each pair of
entities reads, that only differences of positions count, and the settings that cannot work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tandem.daemons.algorithms.entity_relpos import RelativePositions
from tandem.daemons.envs.entity_env import EntityEnv
from tandem.daemons.settings.setup_errors import SetupError
from tests.daemons.algorithms.test_entity_policy import BOUND, sharp, skirmish_config

pytestmark = pytest.mark.usefixtures("examples_on_path")


def test_each_pair_reads_the_row_of_its_clipped_offset_and_a_pair_without_a_position_its_own():
    relpos = RelativePositions([2, 3], head_width=4, width=8)  # offsets -2..2 across, -3..3 down: 5 x 7 cells
    assert relpos.cells == 35 and relpos.keys.num_embeddings == 36
    positions = torch.tensor([[[0.0, 0.0], [1.0, -1.0], [9.0, 0.4], [5.0, 5.0]]])
    placed = torch.tensor([[True, True, True, False]])
    rows = relpos.pair_rows(positions, placed)[0]

    def cell(dx, dy):  # the row of offset (dx, dy), each within its extent
        return (dx + 2) + 5 * (dy + 3)

    assert rows[0, 1] == cell(1, -1) and rows[1, 0] == cell(-1, 1)  # target minus query, each way
    assert rows[0, 0] == rows[1, 1] == cell(0, 0)
    assert rows[0, 2] == cell(2, 0)  # 9 across is clipped to 2, 0.4 down rounds to 0
    assert rows[2, 1] == cell(-2, -1)  # -8 across clipped to -2, -1.4 down rounds to -1
    assert (rows[3] == 35).all() and (rows[:, 3] == 35).all()  # the token without a position: its own row
    moved = relpos.pair_rows(positions + torch.tensor([7.0, -11.0]), placed)[0]
    assert torch.equal(moved, rows)  # moving every entity alike reads the same rows
    coarse = RelativePositions([2, 3], head_width=4, width=8, scale=4.0).pair_rows(positions, placed)[0]
    assert coarse[0, 2] == cell(2, 0) and coarse[0, 1] == cell(0, 0)  # 9 / 4 rounds to 2; 1 / 4 and -1 / 4 to 0


def test_a_position_that_is_not_finite_reads_the_positionless_row_not_an_index_outside_the_table():
    relpos = RelativePositions([2, 2], head_width=4, width=8)
    positions = torch.tensor([[[0.0, 0.0], [float("nan"), 1.0], [float("inf"), 0.0], [1.0, 1.0]]])
    rows = relpos.pair_rows(positions, torch.ones(1, 4, dtype=torch.bool))[0]
    assert (rows >= 0).all() and (rows <= relpos.cells).all()
    assert (rows[1] == relpos.cells).all() and (rows[:, 1] == relpos.cells).all()  # NaN: no position
    assert rows[0, 2] == 4 + 5 * 2 and rows[2, 2] == relpos.cells  # inf clips to the extent; inf - inf is NaN
    assert rows[0, 3] == 3 + 5 * 3  # the rest as ever
    keys, values = relpos.tables(rows[None])
    assert torch.isfinite(keys).all() and torch.isfinite(values).all()


def field(seed: int = 3, scale: float = 4.0) -> dict[str, np.ndarray]:
    """A Skirmish step with its positions spread over a grid of `scale` (the game keeps them in a unit square)."""
    env = EntityEnv(__import__("entity_skirmish").make(), BOUND)
    obs, _ = env.reset(seed=seed)
    for key in ("unit", "enemy"):
        obs[key][:, :2] *= np.float32(scale)
    return obs


def test_relative_positions_change_what_the_policy_does_and_moving_the_whole_field_does_not(tmp_path):
    """Positions measured from the first unit (entity_origin) make the embeddings blind to where the field is;
    relative positions keep that, and still change the policy: without them the same weights act otherwise."""
    obs = field()
    moved = {k: v.copy() for k, v in obs.items()}
    for key in ("unit", "enemy"):
        moved[key][: int(obs[f"count:{key}"]), :2] += np.float32(3.0)
    batch = {k: torch.as_tensor(np.stack([obs[k], moved[k]])) for k in obs}
    torch.manual_seed(0)
    net = sharp(skirmish_config(tmp_path, "model.entity_origin='unit'", "model.entity_relpos=[2, 2]")).net
    with torch.no_grad():
        dist, values = net.forward_all(batch)
        relpos, net.relpos = net.relpos, None
        plain, plain_values = net.forward_all(batch)
        net.relpos = relpos
    probs = [p.numpy() for p in dist.probs()]
    assert max(float(np.abs(p[0] - p[1]).max()) for p in probs) < 1e-4
    assert abs(float(values[0] - values[1])) < 1e-4
    changed = max(float(np.abs(a.numpy() - b).max()) for a, b in zip(plain.probs(), probs))
    assert changed > 0.01 and abs(float(plain_values[0] - values[0])) > 1e-3


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.entity_relpos=[4]"], r"needs one extent for each feature model.entity_position names \(\[0, 1\]\)"),
        (["model.entity_relpos=[4, 4]", "model.entity_position=[5, 6]"], "no entity type holds the position"),
        (["model.entity_relpos=[4, 4]", "model.entity_layers=0"], "set model.entity_layers to 1 or more"),
        (["model.entity_relpos=[4, 4]", "model.kind='mlp'"], "needs model.kind = 'auto', not 'mlp'"),
        (["model.entity_relpos=[600, 600]"], "tells 1442401 offsets apart, more than 1048576: give smaller extents"),
    ],
    ids=["extents", "no-positions", "no-layers", "mlp", "too-many-offsets"],
)
def test_relative_positions_that_cannot_work_are_a_setup_error_naming_the_setting(tmp_path, overrides, message):
    with pytest.raises(SetupError, match=message):
        sharp(skirmish_config(tmp_path, *overrides))
