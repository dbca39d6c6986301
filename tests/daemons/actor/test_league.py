"""A self-play league's parts: its config and checks, which actor plays which member, the seats a member takes,
drawing among several pools, league games on the wire, and the ratings they move."""

from __future__ import annotations

import dataclasses

import pytest

from tandem.daemons.actor.opponents import OpponentDraw
from tandem.daemons.config import ConfigError, load_config
from tandem.daemons.config.selfplay import actor_member, draw_rule, league_members, learning_policy, opponent_pools
from tandem.daemons.envs.spaces import policy_spaces
from tandem.daemons.envs.worlds import env_api, make_world
from tandem.protocol import ProtocolError, TransitionBatch
from tests.daemons.conftest import EXAMPLES
from tests.protocol.samples import unchecked_frames
from tests.protocol.vectors import tiny_batch

LEAGUE = EXAMPLES / "connect_four_league.toml"

pytestmark = pytest.mark.usefixtures("examples_on_path")  # the example's network imports


def league_of(*overrides: str):
    return load_config(LEAGUE, list(overrides))


def test_the_example_league_splits_its_actors_and_names_each_members_pools_and_rule():
    config = league_of("actors.count=3", "selfplay.league.main.actors=2")
    assert league_members(config) == ["main", "exploiter"] and learning_policy(config) == "main"
    assert [actor_member(config, i) for i in range(3)] == ["main", "main", "exploiter"]
    assert opponent_pools(config, "main") == ["main", "exploiter"] and opponent_pools(config, "exploiter") == ["main"]
    assert draw_rule(config, "main") == "prioritized" and draw_rule(config, "exploiter") == "latest"
    # without a league entry a policy plays its own pool, by selfplay.opponents
    plain = league_of("selfplay.league={}", "actors.count=1")
    assert league_members(plain) == ["main"] and opponent_pools(plain, "main") == ["main"]
    assert actor_member(plain, 0) == "main" and draw_rule(plain, "main") == "prioritized"


@pytest.mark.parametrize(
    "overrides,key,message",
    [
        (["actors.count=3"], "actors.count", "take 2 actors.*main: 1, exploiter: 1.*actors.count is 3"),
        (
            ["selfplay.league.exploiter.opponents_from=['nobody']"],
            "selfplay.league.exploiter.opponents_from",
            "'nobody'",
        ),
        (["selfplay.policy='nobody'"], "selfplay.policy", "no policy named 'nobody'"),
        (["policies.exploiter.learner={pool_every=0}"], "policies.exploiter.learner.pool_every", "pool of 'exploiter'"),
        (["selfplay.league.main.opponents='best'"], "selfplay.league.main.opponents", "not one of"),
        (["selfplay.league.main.actors=0"], "selfplay.league.main.actors", ">= 1"),
        (["selfplay.league.ghost={}"], "selfplay.league.ghost", "no policy named 'ghost'"),
    ],
)
def test_league_mistakes_are_config_errors_naming_the_key(overrides, key, message):
    with pytest.raises(ConfigError, match=message) as err:
        league_of(*overrides)
    assert err.value.key.startswith(key)


def test_a_member_that_is_not_the_evaluated_policy_needs_to_be_in_the_league():
    with pytest.raises(ConfigError, match="not in the league; its members: main") as err:
        league_of("selfplay.league={main={}}", "actors.count=1", "selfplay.policy='exploiter'")
    assert err.value.key == "selfplay.policy"


def test_each_member_takes_every_seat_in_its_own_actors_and_a_member_with_no_seat_is_named():
    config = league_of()
    world = make_world(config.env, env_api(config.env))
    try:
        for member in ("main", "exploiter"):
            spaces = policy_spaces(config, world, first=member)
            assert list(spaces) == [member] and spaces[member].agents == ("player_0", "player_1")
        assert list(policy_spaces(config, world)) == ["main"]  # config order otherwise: the other member idles
        narrow = league_of("policies.exploiter.agents=['nobody_*']")
        with pytest.raises(ValueError, match="league member 'exploiter' plays none of the env's agents"):
            policy_spaces(narrow, world, first="exploiter")
    finally:
        world.close()


def test_latest_among_several_pools_is_the_newest_of_one_of_them_and_scores_are_kept_per_policy_and_version():
    draw = OpponentDraw("latest", 0)
    pool = [("main", 5), ("main", 10), ("exploiter", 5), ("exploiter", 15), ("exploiter", 10)]
    assert {draw.draw(pool) for _ in range(100)} == {("main", 10), ("exploiter", 15)}
    prioritized = OpponentDraw("prioritized", 0)
    for _ in range(20):
        prioritized.record(("main", 5), 1.0)
        prioritized.record(("exploiter", 5), 0.0)
    drawn = [prioritized.draw([("main", 5), ("exploiter", 5)]) for _ in range(1000)]
    # weights 0.05 and 1.05: the version it loses to comes up about 95% of the time
    assert 0.92 < drawn.count(("exploiter", 5)) / len(drawn) < 0.98
    assert prioritized.win_rate(("main", 5)) == 1.0 and prioritized.win_rate(("main", 10)) == 0.5


def test_league_games_travel_with_the_other_policys_name_and_bad_ones_are_refused_naming_the_field():
    games = ((5, 1.0), (7, 0.5, "exploiter"), (-1, 0.0))
    back = TransitionBatch.from_frames([bytes(f) for f in dataclasses.replace(tiny_batch(), games=games).to_frames()])
    assert back.games == games
    for bad in (
        [(7, 1.0, "")],  # no name
        [(7, 1.0, "x" * 65)],  # a name past 64 characters
        [(7, 1.0, 3)],  # not a string
        [(-1, 1.0, "exploiter")],  # another policy's live weights are never an opponent
        [(7, 1.0, "exploiter", 1)],  # four entries
    ):
        with pytest.raises(ProtocolError) as err:
            TransitionBatch.from_frames(unchecked_frames(dataclasses.replace(tiny_batch(), games=tuple(bad))))
        assert err.value.field == "games"


def test_games_against_another_policys_versions_rate_them_and_give_a_win_rate_against_that_policy():
    from tandem.daemons.learner import ratings as ratings_module
    from tandem.daemons.learner.ratings import PoolRatings

    ratings = PoolRatings()
    ratings.pooled(10)
    ratings.record([(3, 1.0, "exploiter"), (3, 1.0, "exploiter"), (4, 0.0, "exploiter"), (10, 0.5)])
    counters = ratings.counters()
    assert counters["rated_games"] == 4 and counters["train_win_rate_vs_exploiter"] == pytest.approx(2 / 3)
    assert counters["train_pool_win_rate"] == pytest.approx(2.5 / 4)
    # an exploiter version beaten twice fell below one that won; both started from the model's first rating (25)
    assert ratings.foreign[("exploiter", 3)].mu < 25 < ratings.foreign[("exploiter", 4)].mu
    assert 10 in ratings.pool and ("exploiter", 3) not in ratings.pool  # its own pool keys stay versions
    # what a peer names is bounded: versions of others rated, and other policies given a win rate
    many = [(v, 1.0, f"p{v % 100}") for v in range(ratings_module.MAX_FOREIGN + 50)]
    ratings.record(many)
    assert len(ratings.foreign) == ratings_module.MAX_FOREIGN
    assert len(ratings.recent_vs) == ratings_module.MAX_OTHER_POLICIES
    assert ("exploiter", 3) not in ratings.foreign  # the least recently met went first


def test_an_actor_reports_each_game_in_the_wire_form_of_its_opponent():
    """A version of its own policy as a pair, another policy's as a triple, the live weights as -1."""
    from tandem.daemons.actor.selfplay import wire_game

    assert wire_game("exploiter", ("exploiter", 5), 1.0) == (5, 1.0)
    assert wire_game("exploiter", ("main", 15), 0.0) == (15, 0.0, "main")
    assert wire_game("exploiter", None, 0.5) == (-1, 0.5)
