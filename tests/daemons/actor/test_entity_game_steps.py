"""An action server for entity observations (PROTOCOL.md 7.6): a game's step of a varying set of units is padded
as the policy takes it, refused by name where it does not fit, and answered with one action per head."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tandem.daemons.actor.serve.server import per_head
from tandem.daemons.actor.serve.streams import GameStreams, StepRefused
from tandem.daemons.envs.entity_env import EntityEnv
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.entities import PerEntity, SelectEntity
from tandem.protocol.game import GameAction, GameHello, GameSpaces, GameStep, GameWelcome, decode_game
from tandem.protocol.game_requests import decode_request

BOUND, T = 4, 3
ROW = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)


class Declared(gym.Env):
    observation_space = gym.spaces.Dict(
        {
            "unit": gym.spaces.Sequence(ROW, stack=True),
            "enemy": gym.spaces.Sequence(ROW, stack=True),
            "global": gym.spaces.Box(-1, 1, (1,), np.float32),
            "targets:fire": gym.spaces.Sequence(gym.spaces.MultiBinary(1), stack=True),
        }
    )
    action_space = gym.spaces.Dict({"fire": SelectEntity("unit", "enemy"), "move": PerEntity("unit", 3)})


def streams() -> GameStreams:
    env = EntityEnv(Declared(), BOUND)
    spaces = PolicySpaces((), env.observation_space, env.action_space, 0)
    return GameStreams(spaces, "actor-0", incarnation=1, unroll_length=T, max_streams=8)


def step_obs(units: int, enemies: int, **change) -> dict[str, np.ndarray]:
    obs = {
        "unit": np.full((units, 2), 0.5, np.float32),
        "enemy": np.full((enemies, 2), -0.5, np.float32),
        "global": np.array([0.25], np.float32),
        "targets:fire": np.arange(enemies) % 2 == 0,
    }
    return {**obs, **change}


def test_the_welcome_describes_the_layout_and_travels():
    games = streams()
    spaces = games.wire_spaces
    assert spaces.action_kind == "entities"
    assert spaces.entities["types"] == [["enemy", 2, BOUND], ["unit", 2, BOUND]] and spaces.entities["global"] == 1
    assert [h["name"] for h in spaces.entities["heads"]] == ["fire", "move"]
    welcome = decode_game(GameWelcome(1, [7], spaces, 10.0, "s").to_frames())
    assert welcome.spaces == spaces and not spaces.differences(welcome.spaces)
    plain = GameSpaces((4,), "<f4", "discrete", 2)
    assert "entities" not in plain.to_wire()  # a plain server's spaces are as they were


def test_a_step_of_any_count_is_padded_unrolls_go_ragged_and_actions_come_per_head():
    games = streams()
    stream = games.hello(b"g", GameHello(1, "g", 1), 0.0)[0]
    for t, (units, enemies) in enumerate([(1, 3), (3, 0), (2, 4), (4, 1)]):
        message = decode_request(GameStep(t + 2, stream, step_obs(units, enemies), 1.0).to_frames())
        assert games.step(b"g", message, float(t))
        (request,) = games.take_batch(8)
        assert int(request.obs["count:unit"]) == units and request.obs["unit"].shape == (BOUND, 2)
        slots = np.arange(2 * BOUND, dtype=np.int64) % 3
        games.acted(request, slots, 1, {"logp": np.float32(-1.0)})
        action = per_head(games.entity_rows.env_action(slots, request.obs))
        assert action["move"].shape == (units,) and action["fire"].shape == (units,)
        if enemies == 0:
            assert (action["fire"] == -1).all()  # nothing to fire at: the units do not act
        back = decode_game(GameAction(t + 2, stream, 1, action).to_frames())
        assert set(back.action) == {"fire", "move"}
        np.testing.assert_array_equal(back.action["move"], action["move"])
    (batch,) = games.outbox
    assert batch.obs["unit"].shape == (T + 1, 1, BOUND, 2)
    np.testing.assert_array_equal(batch.obs["count:unit"][:, 0], [1, 3, 2, 4])


@pytest.mark.parametrize(
    "obs, words",
    [
        (step_obs(5, 1), "5 entities in one observation, more than env.max_entities = 4"),
        (step_obs(2, 1, unit=np.zeros((2, 3), np.float32)), r"obs.unit must be \[n, 2\]"),
        (step_obs(2, 1, unit=np.zeros((2, 2))), "obs.unit must be <f4, got <f8"),
        (step_obs(2, 1, enemy=np.full((1, 2), np.nan, np.float32)), "obs.enemy holds NaN"),
        ({k: v for k, v in step_obs(2, 1).items() if k != "global"}, "obs.global is missing"),
        ({**step_obs(2, 1), "allies": np.zeros((1, 2), np.float32)}, "obs.allies is not a key"),
        (step_obs(2, 3, **{"targets:fire": np.ones(2, bool)}), r"'targets:fire' must be \[3\]"),
        (step_obs(2, 1, **{"targets:fire": np.ones(1, np.float32)}), "obs.targets:fire must be bool or uint8"),
        (np.zeros(4, np.float32), "an entity game's obs is one array a key"),
    ],
)
def test_a_step_that_does_not_fit_is_refused_bad_obs_by_name(obs, words):
    games = streams()
    stream = games.hello(b"g", GameHello(1, "g", 1), 0.0)[0]
    with pytest.raises(StepRefused, match=words) as refused:
        games.step(b"g", GameStep(2, stream, obs), 0.0)
    assert refused.value.code == "bad_obs" and not refused.value.fatal


def test_keyed_arrays_are_all_or_nothing():
    frames = GameStep(1, 1, step_obs(1, 1)).to_frames()
    step = decode_game(frames)
    assert sorted(step.obs) == ["enemy", "global", "targets:fire", "unit"]
    mixed = GameStep(1, 1, {"unit": np.zeros((1, 2), np.float32)}).to_frames()
    from tests.protocol.test_game import frames_with

    arrays = [{"name": "obs", "dtype": "<f4", "shape": [1, 2]}, {"name": "obs.unit", "dtype": "<f4", "shape": [1, 2]}]
    with pytest.raises(Exception, match="carries either the array 'obs' or 1 to 64 arrays obs.KEY"):
        decode_game([frames_with(mixed, arrays=arrays)[0], bytes(8), bytes(8)])
