"""EntityGym's example environments (PyPI entity-gym) through the adapter: `env.id = "entitygym/NAME"`."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.config import load_config
from tandem.daemons.envs.gym_envs import make_env
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.settings.schema import EnvSection
from tests.daemons.unrolls import collect, wire

pytest.importorskip("entity_gym", reason="entity-gym is not installed (make test installs it)")

EXAMPLES = ["CherryPick", "Count", "FloorIsLava", "MineSweeper", "MoveToOrigin", "MultiArmedBandit", "Minefield",
            "MultiSnake", "NotHotdog", "PickMatchingBalls", "RockPaperScissors", "TreasureHunt", "Xor"]  # fmt: skip


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_steps_under_the_policys_actions_travels_the_wire_and_trains(tmp_path, name):
    config = load_config(
        "examples/entitygym.toml",
        [f"env.id='entitygym/{name}'", f"run.dir='{tmp_path}'", "env.num_envs=2", "actors.unroll_length=24"]
        + ["algorithm.batch_size=48"],
    )
    spaces = probe_policy_spaces(config)
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    unrolls = collect(config, 2, algorithm.weights())
    received = [wire(unroll) for unroll in unrolls]
    for unroll, back in zip(unrolls, received):
        for key in unroll.obs:
            assert back.obs[key].tobytes() == unroll.obs[key].tobytes(), key
    assert np.isfinite(algorithm.update(received).metrics["loss"])  # types of no features (CherryPick's Player) too


def test_the_adapter_keeps_entitygyms_actors_actees_and_ids():
    """CherryPick: the player picks a cherry by its id; the adapter's value is the cherry's place among all the
    step's entities, and only cherries may be picked (actee_ids)."""
    env = make_env(EnvSection(id="entitygym/CherryPick", max_entities=64))
    obs, _ = env.reset(seed=3)
    head = env.layout.heads[0]
    cherries = int(obs["count:Cherry"])
    assert cherries > 1 and int(obs["count:Player"]) == 1
    targets = obs[f"targets:{head.name}"].astype(bool)
    assert targets[:cherries].all() and not targets[64]  # the cherries (the first type's rows) yes, the player no
    actors = obs[f"actors:{head.name}"].astype(bool)
    assert not actors[:cherries].any() and actors[64]  # only the player (the second type's first row) acts
    inner = env.unwrapped
    quality = obs["Cherry"][:cherries, 0]
    action = np.zeros(env.action_space.shape, np.int64)
    action[head.offset + 64] = int(np.argmax(quality))  # the player's slot: the first row of its type
    _, reward, *_ = env.step(action)
    assert reward == pytest.approx(float(quality.max()))
    assert inner.last is not None


def test_an_entity_the_step_hides_is_left_out():
    """RockPaperScissors shows the opponent's throw only with cheat (EntityGym's `visible`)."""
    for cheat, shown in ((False, 0), (True, 1)):
        env = make_env(EnvSection(id="entitygym/RockPaperScissors", max_entities=4, kwargs={"cheat": cheat}))
        obs, _ = env.reset(seed=1)
        assert int(obs["count:Opponent"]) == shown and int(obs["count:Player"]) == 1
