"""learner.augment: the copies an update trains on beside its unrolls (the Connect Four example's mirror image)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP
from tandem.daemons.config import ConfigError, load_config
from tandem.daemons.envs.spaces import ObsAdapter
from tandem.daemons.learner.augment import UnrollAugment
from tandem.protocol import TransitionBatch
from tests.daemons.actor.test_selfplay import first_legal_unroll, position_after
from tests.daemons.conftest import EXAMPLES

CONFIG = EXAMPLES / "connect_four_selfplay.toml"
MIRROR = "connect_four_mirror:mirror_unroll"

pytestmark = pytest.mark.usefixtures("examples_on_path")


def flat(obs: dict) -> np.ndarray:
    """An observation as the actor sends it (board, then mask)."""
    from gymnasium import spaces

    board = spaces.Box(0, 1, obs["observation"].shape, np.int8)
    adapter = ObsAdapter(spaces.Dict(observation=board, action_mask=spaces.Box(0, 1, (7,), np.int8)), "test")
    return adapter(obs)


def unroll_of(moves: list[int]) -> TransitionBatch:
    """One env's unroll of these moves, as the side to move saw each position (T = len(moves))."""
    positions = [flat(position_after(moves[:t])) for t in range(len(moves) + 1)]
    steps = len(moves)
    return TransitionBatch(
        policy_id="default",
        actor_id="actor-0",
        incarnation=0,
        seq=0,
        policy_version=0,
        env_steps=steps,
        obs=np.stack(positions)[:, None],
        actions=np.asarray(moves, np.int64)[:, None],
        rewards=np.linspace(-1, 1, steps, dtype=np.float32)[:, None],
        terminated=np.zeros((steps, 1), bool),
        truncated=np.zeros((steps, 1), bool),
        final_obs=np.zeros((0, positions[0].size), np.float32),
        extras={BEHAVIOUR_LOGP: np.full((steps, 1), -1.5, np.float32)},
        games=((0, 1.0),),
    )


def test_the_mirror_image_of_a_game_is_the_game_played_in_the_mirrored_columns():
    from connect_four_mirror import mirror_unroll

    moves = [3, 2, 0, 6, 6, 5, 1]
    original = unroll_of(moves)
    copy = mirror_unroll(original)
    expected = unroll_of([6 - c for c in moves])  # every position and move of the mirrored game
    assert np.array_equal(copy.obs, expected.obs) and np.array_equal(copy.actions, expected.actions)
    assert not np.array_equal(copy.obs, original.obs)  # the positions are not symmetric themselves
    assert np.array_equal(copy.rewards, original.rewards)
    assert np.array_equal(copy.extras[BEHAVIOUR_LOGP], original.extras[BEHAVIOUR_LOGP])
    assert copy.games == ()  # a game is rated once, from the unroll that came
    assert np.array_equal(mirror_unroll(copy).obs, original.obs)  # twice mirrored is the game itself


def test_the_augment_returns_the_unrolls_then_their_copies_and_names_a_copy_that_does_not_fit():
    augment = UnrollAugment(MIRROR)
    unrolls = [unroll_of([3, 4]), unroll_of([0, 1, 2])]
    out = augment(unrolls)
    assert out[:2] == unrolls and len(out) == 4
    assert np.array_equal(out[3].actions, 6 - unrolls[1].actions)

    def bad(change):
        augment.copy = change
        with pytest.raises(ValueError, match=f"learner.augment '{MIRROR}'") as raised:
            augment(unrolls)
        return str(raised.value)

    with pytest.raises(ValueError, match="learner.augment: the algorithm's feed gives its update a dict, not unrolls"):
        augment({"obs": unrolls[0].obs})
    assert "not a TransitionBatch" in bad(lambda u: u.obs)
    assert "its obs is float32 [3, 1, 90]" in bad(lambda u: dataclasses.replace(u, obs=u.obs[..., 1:]))
    assert "its actions is int32" in bad(lambda u: dataclasses.replace(u, actions=u.actions.astype(np.int32)))
    assert f"its extra.{BEHAVIOUR_LOGP} is nothing" in bad(lambda u: dataclasses.replace(u, extras={}))
    ended = lambda u: dataclasses.replace(u, terminated=np.ones_like(u.terminated))  # noqa: E731
    assert "ends episodes elsewhere" in bad(ended)


def test_augment_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="learner.augment.*'mirror' is not 'module:callable'"):
        load_config(CONFIG, ["learner.augment='mirror'"])
    with pytest.raises(ConfigError, match="learner.augment.*'double_dqn' trains on replayed transitions.*appo"):
        load_config(EXAMPLES / "cartpole.toml", [f"learner.augment='{MIRROR}'", "algorithm.name='double_dqn'"])
    assert load_config(CONFIG, [f"learner.augment='{MIRROR}'"]).learner.augment == MIRROR


def test_an_update_trains_on_the_copies_while_the_feed_and_the_ratings_count_what_came(tmp_path, built_learner):
    learner = built_learner(
        load_config(
            CONFIG,
            [
                f"run.dir='{tmp_path}'",
                "actors.unroll_length=4",
                "algorithm.batch_size=4",
                f"learner.augment='{MIRROR}'",
            ],
        )
    )
    learner.publish()
    from tests.protocol.samples import unchecked_frames

    batch = first_legal_unroll(learner.config, games=((0, 1.0),))
    learner.intake.handle(unchecked_frames(batch))
    trained: list[list[TransitionBatch]] = []
    prepare = learner.training.prepare  # the unrolls an update trains on, before they become its tensors
    learner.training.prepare = lambda unrolls: trained.append(unrolls) or prepare(unrolls)
    before = {k: v.clone() for k, v in learner.training.algorithm.net.state_dict().items()}
    assert learner.training.step(version=0)
    (unrolls,) = trained
    assert len(unrolls) == 2 and np.array_equal(unrolls[1].actions, 6 - unrolls[0].actions)
    assert np.array_equal(unrolls[0].obs, batch.obs)
    counters = learner.metrics.counters()
    assert counters["transitions_received"] == batch.num_transitions and counters["rated_games"] == 1
    after = learner.training.algorithm.net.state_dict()
    assert any(not np.array_equal(before[k].numpy(), after[k].numpy()) for k in before)  # it trained
