"""An env that declares entities, as Tandem carries it: padded to env.max_entities, masks in their heads' slots,
one action per head back to the env; declarations that do not fit are refused by name."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tandem.daemons.envs.entity_env import NO_ACTION, EntityEnv
from tandem.daemons.envs.gym_envs import EnvSetupError, make_env
from tandem.daemons.settings.schema import EnvSection
from tandem.entities import PerEntity, SelectEntity

ROW = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)


class Scripted(gym.Env):
    """Shows the observations it is given, one a step, and keeps the actions it gets."""

    def __init__(self, observations, obs_space=None, action_space=None):
        self.observations = list(observations)
        self.observation_space = obs_space or gym.spaces.Dict(
            {
                "ally": gym.spaces.Sequence(ROW, stack=True),
                "foe": gym.spaces.Sequence(ROW, stack=True),
                "global": gym.spaces.Box(-1, 1, (1,), np.float32),
                "mask:move": gym.spaces.Sequence(gym.spaces.MultiBinary(3), stack=True),
                "targets:shoot": gym.spaces.Sequence(gym.spaces.MultiBinary(1), stack=True),
                "mask:mode": gym.spaces.MultiBinary(2),
            }
        )
        self.action_space = action_space or gym.spaces.Dict(
            {
                "move": PerEntity("ally", 3),
                "shoot": SelectEntity(["ally"], ["ally", "foe"]),
                "mode": gym.spaces.Discrete(2),
            }
        )
        self.actions = []

    def reset(self, *, seed=None, options=None):
        return self.observations[0], {}

    def step(self, action):
        self.actions.append(action)
        return self.observations[min(len(self.actions), len(self.observations) - 1)], 0.0, False, False, {}


def step_obs(allies: int, foes: int) -> dict:
    return {
        "ally": np.arange(allies * 2, dtype=np.float32).reshape(allies, 2) + 1,
        "foe": -np.ones((foes, 2), np.float32),
        "global": np.array([0.5], np.float32),
        "mask:move": np.tile([True, False, True], (allies, 1)),
        "targets:shoot": np.arange(allies + foes) % 2 == 0,
        "mask:mode": np.array([False, True]),
    }


def test_observations_are_padded_and_masks_land_in_their_slots():
    env = EntityEnv(Scripted([step_obs(2, 3)]), bound=4)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs["ally"][:2], [[1, 2], [3, 4]])
    assert not obs["ally"][2:].any() and int(obs["count:ally"]) == 2 and int(obs["count:foe"]) == 3
    np.testing.assert_array_equal(obs["mask:move"][:2], [[1, 0, 1]] * 2)
    assert obs["mask:move"][2:].all()  # rows past the entities: all allowed (the policy forces them to 0 anyway)
    # the select head's targets: the allies' 4 rows, then the foes' 4 (padding rows allowed: never present)
    np.testing.assert_array_equal(obs["targets:shoot"], [1, 0, 1, 1, 1, 0, 1, 1])
    heads = {h.name: h for h in env.layout.heads}
    assert [h.name for h in env.layout.heads] == ["mode", "move", "shoot"]  # gymnasium sorts a Dict's keys
    assert (heads["mode"].slots, heads["move"].slots, heads["shoot"].slots, heads["shoot"].choices) == (1, 4, 4, 8)


def test_each_head_gets_one_entry_per_present_actor_and_no_action_where_one_cannot_act():
    inner = Scripted([step_obs(3, 1), step_obs(1, 1)])
    env = EntityEnv(inner, bound=4)
    env.reset()
    heads = {h.name: h for h in env.layout.heads}
    action = np.zeros(env.action_space.shape, np.int64)
    action[heads["mode"].offset] = 1
    action[heads["move"].offset : heads["move"].offset + 4] = [2, 0, 1, 0]
    action[heads["shoot"].offset : heads["shoot"].offset + 4] = [3, 1, 0, 0]
    env.step(action)
    got = inner.actions[-1]
    assert got["mode"] == 1
    np.testing.assert_array_equal(got["move"], [2, 0, 1])
    np.testing.assert_array_equal(got["shoot"], [3, 1, 0])
    obs = step_obs(1, 1)
    obs["targets:shoot"] = np.zeros(2, bool)  # nothing to shoot at: the unit does not act
    inner.observations = [obs]
    env.reset()
    env.step(np.zeros(env.action_space.shape, np.int64))
    np.testing.assert_array_equal(inner.actions[-1]["shoot"], [NO_ACTION])


def test_more_entities_than_the_bound_and_a_mask_of_the_wrong_rows_are_named():
    env = EntityEnv(Scripted([step_obs(5, 1)]), bound=4)
    with pytest.raises(
        ValueError, match="entity type 'ally': 5 entities in one observation, more than env.max_entities = 4"
    ):
        env.reset()
    bad = step_obs(2, 1)
    bad["mask:move"] = np.ones((3, 3), bool)
    with pytest.raises(ValueError, match=r"'mask:move' must be \[2, 3\] \(one row per present entity\), got \[3, 3\]"):
        EntityEnv(Scripted([bad]), bound=4).reset()


@pytest.mark.parametrize(
    "obs_space, action_space, message",
    [
        ({"ally": gym.spaces.Sequence(gym.spaces.Discrete(3))}, {"m": PerEntity("ally", 2)}, "Sequence of 1-D Box"),
        ({"ally": gym.spaces.Sequence(ROW), "score": ROW}, {"m": PerEntity("ally", 2)}, "observation key 'score'"),
        ({"ally": gym.spaces.Sequence(ROW)}, {"m": PerEntity("foe", 2)}, "names entity type 'foe'"),
        ({"ally": gym.spaces.Sequence(ROW)}, {"m": gym.spaces.MultiBinary(2)}, "a head is a PerEntity"),
        (
            {"ally": gym.spaces.Sequence(ROW), "mask:fly": gym.spaces.MultiBinary(2)},
            {"m": PerEntity("ally", 2)},
            "'mask:fly' names no action head",
        ),
    ],
)
def test_a_declaration_that_does_not_fit_is_a_setup_error_naming_it(obs_space, action_space, message):
    env = Scripted([{}], gym.spaces.Dict(obs_space), gym.spaces.Dict(action_space))
    with pytest.raises(ValueError, match=message):
        EntityEnv(env, bound=4)


def test_make_env_pads_an_entity_env_and_names_an_unknown_entitygym_example(examples_on_path):
    env = make_env(EnvSection(id="entity_skirmish:make", max_entities=6))
    assert isinstance(env.unwrapped, gym.Env) and env.observation_space["unit"].shape == (6, 3)
    with pytest.raises(EnvSetupError, match="no such EntityGym example; one of CherryPick"):
        make_env(EnvSection(id="entitygym/Chess"))


def test_entity_and_hybrid_action_spaces_survive_json():
    """policy.json describes the action vector's heads (a Box head's bounds too, infinite ones as strings)."""
    import json

    from tandem.client.api.space_json import space_from_json, space_to_json

    inner = Scripted([step_obs(1, 1)])
    inner.action_space = gym.spaces.Dict(
        {**inner.action_space.spaces, "thrust": gym.spaces.Box(np.array([-np.inf, 0.0]), np.array([np.inf, 2.0]))}
    )
    for env in (EntityEnv(Scripted([step_obs(1, 1)]), bound=4), EntityEnv(inner, bound=4)):
        back = space_from_json(json.loads(json.dumps(space_to_json(env.action_space))))
        assert type(back) is type(env.action_space) and back.heads == env.action_space.heads
        bounds = ("nvec",) if hasattr(back, "nvec") else ("low", "high")
        assert all(np.array_equal(getattr(back, b), getattr(env.action_space, b)) for b in bounds)
