"""Self-play parts on real Connect Four worlds and real sockets: the learner's opponent pool, the snapshot socket
serving pooled versions, an actor's opponent networks, the draw rules and the seats."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import zmq

from tandem.daemons.actor.opponents import OpponentDraw, OpponentNets
from tandem.daemons.algorithms import make_algorithm, make_policy
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP
from tandem.daemons.config import ConfigError, config_from_dict, load_config
from tandem.daemons.envs.rollout import MultiAgentRollout
from tandem.daemons.envs.seats import SelfPlaySeats
from tandem.daemons.envs.spaces import policy_spaces
from tandem.daemons.envs.worlds import env_api, make_world
from tandem.daemons.learner.opponent_pool import OpponentPool
from tandem.daemons.learner.snapshots import serve_snapshots
from tandem.protocol import ControlReply, TransitionBatch, WeightBlob, decode, sockets
from tests.daemons.conftest import EXAMPLES

CONFIG = EXAMPLES / "connect_four_selfplay.toml"
WAIT_S = 5.0

pytestmark = pytest.mark.usefixtures("examples_on_path")  # the example's network and scripted player import


def config_of(*overrides: str):
    return load_config(CONFIG, list(overrides))


def spaces_and_world(config):
    world = make_world(config.env, env_api(config.env))
    return policy_spaces(config, world)["default"], world


def new_net(config, spaces, seed: int = 0):
    return make_policy(config, spaces.observation_space, spaces.action_space, seed=seed, mask_size=spaces.mask_size)


def weights_of(config, spaces, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights a learner of this policy would publish (its algorithm's initial ones, seeded by run.seed)."""
    seeded = dataclasses.replace(config, run=dataclasses.replace(config.run, seed=seed))
    return make_algorithm(seeded, spaces.observation_space, spaces.action_space, "cpu").weights()


def blob_frames(tensors, version: int) -> list[bytes]:
    return [bytes(f) for f in WeightBlob.build("default", version, version, tensors).to_frames()]


# ---------------------------------------------------------------------- the learner's pool


def test_the_pool_keeps_every_kth_version_at_most_n_and_a_restart_reads_them_back(tmp_path):
    config = config_of()
    spaces, world = spaces_and_world(config)
    world.close()
    tensors = weights_of(config, spaces)
    counts: dict[str, float] = {}
    pool = OpponentPool(tmp_path / "pool", every=3, size=4, counts=counts)
    for version in range(41):
        pool.offer(version, blob_frames(tensors, version))
    assert pool.versions == (30, 33, 36, 39)
    assert sorted(p.name for p in (tmp_path / "pool").iterdir()) == ["v30.blob", "v33.blob", "v36.blob", "v39.blob"]
    assert counts["pool_snapshots_saved"] == 14 and counts["pool_snapshots_removed"] == 10
    assert WeightBlob.from_frames(pool.frames(36)).version == 36 and pool.frames(35) is None
    # A restarted learner: the same pool; a damaged file is removed and counted, a stray one left alone.
    (tmp_path / "pool" / "v33.blob").write_bytes((tmp_path / "pool" / "v33.blob").read_bytes()[:-9])
    (tmp_path / "pool" / "notes.txt").write_text("mine")
    again: dict[str, float] = {}
    restarted = OpponentPool(tmp_path / "pool", every=3, size=4, counts=again)
    restarted.load()
    assert restarted.versions == (30, 36, 39) and again["pool_snapshots_damaged"] == 1
    assert not (tmp_path / "pool" / "v33.blob").exists() and (tmp_path / "pool" / "notes.txt").exists()
    smaller = OpponentPool(tmp_path / "pool", every=3, size=2, counts={})
    smaller.load()  # a smaller pool_size after a restart trims the oldest
    assert smaller.versions == (36, 39) and not (tmp_path / "pool" / "v30.blob").exists()


def test_a_learner_without_a_pool_keeps_nothing_and_reports_no_pool_counters(tmp_path):
    counts: dict[str, float] = {}
    pool = OpponentPool(tmp_path / "pool", every=0, size=50, counts=counts)
    assert not pool.offer(10, [b"x"]) and pool.versions == () and counts == {}
    assert not (tmp_path / "pool").exists()


@pytest.fixture
def snapshot_pair(tmp_path):
    """(router, dealer endpoint, ctx): the learner's snapshot ROUTER bound on ipc; closed afterwards."""
    ctx = zmq.Context()
    endpoint = f"ipc://{tmp_path}/snapshot"
    router = sockets.snapshot_router(ctx, endpoint)
    yield router, endpoint, ctx
    sockets.close(router, linger_ms=0)
    ctx.destroy(linger=0)


def pool_of(tmp_path, every: int, versions: tuple[int, ...]):
    """(config, spaces, pool, counts): a pool of the example's policy holding `versions`, each its own weights."""
    config = config_of()
    spaces, world = spaces_and_world(config)
    world.close()
    counts: dict[str, float] = {"snapshots_served": 0}
    pool = OpponentPool(tmp_path / "pool", every=every, size=len(versions), counts=counts)
    for version in versions:
        pool.offer(version, blob_frames(weights_of(config, spaces, seed=version), version))
    return config, spaces, pool, counts


def serve_until(router, done, pool, counts, latest=None) -> None:
    """Serve the snapshot socket as the learner's thread does until `done()` (at most WAIT_S)."""
    import time

    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "no answer in time"
        if sockets.poll([router], 20):
            serve_snapshots(router, "default", 50, latest, counts, pool)


def test_the_snapshot_socket_serves_a_pooled_version_and_names_one_it_does_not_keep(tmp_path, snapshot_pair):
    from tandem.protocol import WeightRequest

    router, endpoint, ctx = snapshot_pair
    config, spaces, pool, counts = pool_of(tmp_path, 5, (5, 10, 15))
    dealer = sockets.snapshot_dealer(ctx, endpoint)
    try:
        replies = []

        def got() -> bool:
            while (frames := sockets.recv_frames(dealer, 0)) is not None:
                replies.append(decode(frames))
            return len(replies) == 3

        latest = blob_frames(weights_of(config, spaces), 50)
        # Two at a time: the snapshot socket queues at most two replies to one peer (as an actor asks).
        for version in (10, 7):
            assert sockets.send_message(dealer, WeightRequest("default", -1, "actor-0", version), timeout_ms=1000)
        serve_until(router, lambda: (got(), len(replies) == 2)[1], pool, counts, latest)
        assert sockets.send_message(dealer, WeightRequest("default", -1, "actor-0"), timeout_ms=1000)  # the latest
        serve_until(router, got, pool, counts, latest)
        pooled, refused, newest = replies
        assert isinstance(pooled, WeightBlob) and pooled.version == 10
        pooled.verify_checksum()
        assert isinstance(refused, ControlReply) and refused.code == "not_in_pool" and refused.data == {"version": 7}
        assert "5..15 (3 versions)" in refused.message
        assert isinstance(newest, WeightBlob) and newest.version == 50
        assert counts["pool_snapshots_served"] == 1 and counts["pool_requests_refused"] == 1
        assert counts["snapshots_served"] == 1
    finally:
        sockets.close(dealer, linger_ms=0)


# ---------------------------------------------------------------------- an actor's opponents


def test_opponent_nets_load_without_waiting_keep_at_most_n_and_survive_bad_weights(tmp_path, snapshot_pair):
    router, endpoint, ctx = snapshot_pair
    config, spaces, pool, counts = pool_of(tmp_path, 1, (1, 2, 3))
    nets = OpponentNets(ctx, "default", endpoint, "actor-0", lambda: new_net(config, spaces), size=2, timeout_s=2.0)
    try:
        nets.want(1)
        assert nets.get(1) is None  # asked, not waited for
        # (a request made before the connection's handshake ends is not sent: an actor asks again at its next draw)
        serve_until(router, lambda: (nets.want(1), nets.poll(), nets.get(1) is not None)[2], pool, counts)
        one = nets.get(1)
        assert one is not None and nets.counts["opponent_loads"] == 1
        obs = np.zeros((4, spaces.observation_space.shape[0]), np.float32)
        obs[:, -7:] = 1  # every column legal
        expected = new_net(config, spaces, seed=1)
        expected.load_weights(WeightBlob.from_frames(pool.frames(1)).tensors)
        np.testing.assert_array_equal(one.act(obs, np.zeros(4)), expected.act(obs, np.zeros(4)))
        for version in (2, 3):
            serve_until(router, lambda v=version: (nets.want(v), nets.poll(), nets.get(v) is not None)[2], pool, counts)
        assert sorted(nets.nets) == [2, 3]  # at most 2 held: the least recently used (1) went
        # A version the pool does not hold: refused, counted; a blob of NaN weights and one with a bad checksum:
        # counted, and what is held stays.
        nets.want(9)
        serve_until(router, lambda: (nets.poll(), nets.counts["opponent_loads_failed"] == 1)[1], pool, counts)
        good = weights_of(config, spaces)
        nan = {name: np.full_like(t, np.nan) for name, t in good.items()}
        bad = [
            blob_frames(nan, 4),
            blob_frames(good, 5)[:1] + [b"\x00" * len(f) for f in blob_frames(good, 5)[1:]],  # checksum wrong
        ]
        for i, frames in enumerate(bad):
            nets.want(4 + i)
            request = sockets.recv_frames(router, 2000)
            sockets.send_frames(router, [bytes(request[0]), *frames])
            serve_until(router, lambda n=i: (nets.poll(), nets.counts["opponent_loads_failed"] == 2 + n)[1], None, {})
        assert sorted(nets.nets) == [2, 3] and nets.counts["opponent_loads"] == 3
        # No answer at all: the request expires and is counted; nothing blocks meanwhile.
        nets.want(6)
        sockets.recv_frames(router, 2000)  # taken, never answered
        import time

        assert nets.poll(now=time.monotonic() + 3.0) == [] and nets.counts["opponent_loads_failed"] == 4
        assert not nets.pending
    finally:
        nets.close()


def test_the_draw_rules():
    with pytest.raises(ValueError, match="rules: latest, uniform, prioritized"):
        OpponentDraw("best", 0)
    assert OpponentDraw("latest", 0).draw([3, 6, 9]) == 9 and OpponentDraw("latest", 0).draw([]) is None
    uniform = OpponentDraw("uniform", 0)
    assert {uniform.draw([3, 6, 9]) for _ in range(200)} == {3, 6, 9}
    prioritized = OpponentDraw("prioritized", 0)
    for _ in range(20):
        prioritized.record(3, 1.0)  # always beaten: rarely worth playing
        prioritized.record(6, 0.0)  # always wins: played most
    drawn = [prioritized.draw([3, 6, 9]) for _ in range(3000)]
    share = {v: drawn.count(v) / len(drawn) for v in (3, 6, 9)}
    # weights (1 - w)^2 + 0.05: 0.05, 1.05, 0.30 -> shares 0.036, 0.75, 0.214
    assert share[3] < 0.06 and 0.7 < share[6] < 0.8 and 0.17 < share[9] < 0.26, share
    assert prioritized.win_rate(9) == 0.5 and prioritized.win_rate(3) == 1.0


# ---------------------------------------------------------------------- seats on real Connect Four worlds


def first_legal(obs: np.ndarray) -> np.ndarray:
    """The leftmost legal column (the mask is the last 7 entries)."""
    return np.argmax(obs[:, -7:] > 0, axis=1)


def last_legal(obs: np.ndarray) -> np.ndarray:
    """The rightmost legal column: a scripted player the tests below name by its module path."""
    legal = obs[:, -7:] > 0
    return 6 - np.argmax(legal[:, ::-1], axis=1)


def test_a_share_of_games_goes_to_the_scripted_player_counted_apart_and_never_rated(zmq_ctx, short_tmp):
    """`selfplay.scripted_share` of the episodes play the scripted player: its moves, its own counters, and no game
    sent for rating or scored against a pooled version (it has none)."""
    from tandem.daemons.acting.link import PolicyLink
    from tandem.daemons.actor.selfplay import SCRIPTED, SelfPlay
    from tandem.daemons.runtime.endpoints import LearnerEndpoints
    from tandem.daemons.settings.setup_errors import SetupError

    scripted = [
        "selfplay.scripted_opponent='tests.daemons.actor.test_selfplay:last_legal'",
        "selfplay.scripted_share=0.25",
    ]
    config = config_of(*scripted)
    spaces, world = spaces_and_world(config)
    world.close()
    ends = LearnerEndpoints(*(f"ipc://{short_tmp}/{name}" for name in ("t", "w", "s")))
    link = PolicyLink(zmq_ctx, config, "default", spaces, ends, "actor-0", seed=0)
    selfplay = SelfPlay(config, zmq_ctx, link, "actor-0", worlds=4, seed=0)
    try:
        drawn = [selfplay.draw() for _ in range(2000)]
        assert 0.22 < drawn.count(SCRIPTED) / len(drawn) < 0.28  # the rest: the live weights (no pool yet)
        assert set(drawn) == {SCRIPTED, None}
        obs = np.zeros((3, spaces.observation_space.shape[0]), np.float32)
        obs[:, -7:] = [[1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 1, 0]]
        assert selfplay.choose(SCRIPTED, obs).tolist() == [6, 1, 5]
        selfplay.scored(SCRIPTED, 1.0)
        selfplay.scored(SCRIPTED, 0.0)
        selfplay.scored(None, 0.5)  # a game against the live weights: the pool's counters, sent for rating
        counters = selfplay.counters()
        assert counters["selfplay_scripted_games"] == 2 and counters["selfplay_scripted_wins"] == 1
        assert counters["selfplay_scripted_win_rate"] == 0.5
        assert (
            counters["selfplay_games"] == 1 and counters["selfplay_draws"] == 1 and counters["selfplay_win_rate"] == 0.5
        )
        assert list(selfplay.unsent) == [(-1, 0.5)] and selfplay.draw_rule.results == {}
        plain = SelfPlay(config_of("selfplay.scripted_share=0"), zmq_ctx, link, "actor-0", worlds=4, seed=0)
        assert SCRIPTED not in {plain.draw() for _ in range(200)} and "selfplay_scripted_games" not in plain.counters()
        plain.close()
        bad = config_of("selfplay.scripted_opponent='nowhere:player'", "selfplay.scripted_share=0.25")
        with pytest.raises(SetupError, match="selfplay.scripted_opponent 'nowhere:player': cannot import"):
            SelfPlay(bad, zmq_ctx, link, "actor-0", worlds=4, seed=0)
    finally:
        selfplay.close()
        link.close()


def test_pooled_opponents_sample_their_moves_or_play_their_most_likely_one(zmq_ctx, short_tmp):
    """`selfplay.opponent_moves`: 'sampled' (the default) draws an opponent's moves from its policy; 'greedy' plays
    its most likely legal move every time, as the evaluator's `act` does."""
    from tandem.daemons.acting.link import PolicyLink
    from tandem.daemons.actor.selfplay import SelfPlay
    from tandem.daemons.runtime.endpoints import LearnerEndpoints

    config = config_of()
    spaces, world = spaces_and_world(config)
    world.close()
    ends = LearnerEndpoints(*(f"ipc://{short_tmp}/{name}" for name in ("t", "w", "s")))
    link = PolicyLink(zmq_ctx, config, "default", spaces, ends, "actor-0", seed=0)
    sampled = SelfPlay(config, zmq_ctx, link, "actor-0", worlds=4, seed=0)
    greedy = SelfPlay(config_of("selfplay.opponent_moves='greedy'"), zmq_ctx, link, "actor-0", worlds=4, seed=0)
    try:
        obs = np.zeros((64, spaces.observation_space.shape[0]), np.float32)
        obs[:, -7:] = 1.0
        obs[:, -7:-4] = 0.0  # columns 0-2 full: never chosen
        best = link.net.act(obs, np.zeros(len(obs)))
        for _ in range(5):  # no pool yet: the live weights play
            assert greedy.choose(None, obs).tolist() == best.tolist()
        moves = np.stack([sampled.choose(None, obs) for _ in range(5)])
        assert (moves >= 3).all() and (moves != best).any()  # a fresh policy is near uniform: samples differ
        with pytest.raises(ConfigError, match="sampled.*greedy"):
            config_of("selfplay.opponent_moves='best'")
    finally:
        sampled.close()
        greedy.close()
        link.close()


def test_only_the_learning_seat_is_recorded_and_each_game_is_scored_from_its_side():
    config = config_of("actors.unroll_length=4")
    worlds = [make_world(config.env, env_api(config.env)) for _ in range(4)]
    spaces = policy_spaces(config, worlds[0])
    games: list[tuple[int | None, float]] = []
    seats = SelfPlaySeats("default", len(worlds), 0, lambda: 7, lambda v, s: games.append((v, s)))
    rollout = MultiAgentRollout(worlds, "aec", spaces, 4, "actor-0", seed=0)
    rollout.seat(seats, lambda version, obs: first_legal(obs))
    rng = np.random.default_rng(0)
    turns = {"learning": 0, "opponent": 0}
    seats_seen = set()

    def choose(policy, obs, w):
        turns["learning"] += len(obs)
        legal = obs[:, -7:] > 0
        return np.array([rng.choice(np.flatnonzero(row)) for row in legal]), {"logp": np.zeros(len(obs), np.float32)}

    def opponent(version, obs):
        assert version == 7
        turns["opponent"] += len(obs)
        return first_legal(obs)

    rollout.opponent_choose = opponent
    batches = []
    for _ in range(400):
        seats_seen.update(s for s in seats.learner_seat if s)
        rollout.tick(choose, {"default": 3})
        batches += rollout.outbox
        rollout.outbox.clear()
    recorded = sum(b.num_transitions for b in batches) + sum(
        len(stream.actions) for stream in rollout.streams.values() if hasattr(stream, "actions")
    )
    assert turns["opponent"] > 0 and batches
    assert sum(b.num_transitions for b in batches) <= turns["learning"] <= recorded + 4 * len(worlds) * 2
    assert seats_seen == {"player_0", "player_1"}  # first and second mover both learn
    assert len(games) == rollout.episodes and len(games) > 10
    # The learning side's return decides: Connect Four pays +1 / -1 / 0, so wins and losses match returns.
    assert {s for _, s in games} <= {0.0, 0.5, 1.0} and all(v == 7 for v, _ in games)
    wins = sum(s == 1.0 for _, s in games)
    assert 0 < wins < len(games)  # random play against the leftmost column: some won, some lost


def test_seats_score_a_draw_and_a_game_whose_learning_seat_never_ended():
    scored = []
    seats = SelfPlaySeats("p", 1, 0, lambda: None, lambda v, s: scored.append((v, s)))
    seats.new_episode(0, ["a"])
    seats.agent_ended(0, "a", 0.0)
    seats.agent_ended(0, "b", 0.0)
    assert seats.episode_over(0) == 0.5 and scored == [(None, 0.5)]
    seats.new_episode(0, ["a"])
    seats.agent_ended(0, "b", 1.0)
    assert seats.episode_over(0) is None and len(scored) == 1


def test_selfplay_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="learner.pool_every.*> 0"):
        config_of("learner.pool_every=0")
    with pytest.raises(ConfigError, match="selfplay.scripted_share.*set selfplay.scripted_opponent"):
        config_of("selfplay.scripted_opponent=''", "selfplay.scripted_share=0.2")
    with pytest.raises(ConfigError, match="selfplay.scripted_share"):
        config_of("selfplay.scripted_share=1.5", "selfplay.scripted_opponent='random'")
    with pytest.raises(ConfigError, match="selfplay.policy.*no policy named 'nobody'"):
        config_of("selfplay.policy='nobody'")
    with pytest.raises(ConfigError, match="model.core.*feed-forward"):
        config_of("model.core='lstm'", "algorithm.minibatch_by='unrolls'")
    assert config_from_dict({"selfplay": {"enabled": False}}).selfplay.enabled is False


# ---------------------------------------------------------------------- ratings, and the games that move them


def test_ratings_move_as_plackett_luce_says_on_hand_made_results():
    from tandem.daemons.learner.ratings import PoolRatings

    ratings = PoolRatings()
    ratings.pooled(10)  # enters at the learning policy's rating: mu 25, sigma 25/3
    ratings.record([(10, 1.0)])
    # Two players of equal rating, sigma^2 = (25/3)^2 + tau^2 (tau = 25/300), beta = 25/6:
    # c = sqrt(2 sigma^2 + 2 beta^2); the winner gains sigma^2 / c * (1 - 1/2), the loser loses as much.
    sigma2 = (25 / 3) ** 2 + (25 / 300) ** 2
    step = sigma2 / np.sqrt(2 * sigma2 + 2 * (25 / 6) ** 2) * 0.5
    counters = ratings.counters()
    assert counters["train_rating"] == pytest.approx(25 + step, abs=1e-9)
    assert ratings.pool[10].mu == pytest.approx(25 - step, abs=1e-9)
    assert counters["rated_games"] == 1 and counters["train_pool_win_rate"] == 1.0
    before = ratings.learner.mu
    ratings.record([(10, 0.0)])  # a loss moves it back down
    assert ratings.learner.mu < before
    ratings.pooled(20)
    level = ratings.learner.mu
    ratings.record([(20, 0.5), (-1, 1.0), (99, 0.0)])  # a draw with its equal, the live policy, a forgotten one
    assert ratings.learner.mu == pytest.approx(level, abs=1e-9)
    assert ratings.counters()["rated_games"] == 5 and ratings.counters()["train_pool_win_rate"] == pytest.approx(0.5)
    ratings.forget([20])
    assert list(ratings.pool) == [20]


def test_games_travel_with_a_batch_and_malformed_ones_are_refused_naming_the_field():
    from tandem.protocol import ProtocolError, TransitionBatch
    from tests.protocol.samples import unchecked_frames
    from tests.protocol.vectors import tiny_batch

    batch = dataclasses.replace(tiny_batch(), games=((5, 1.0), (-1, 0.5), (10, 0.0)))
    back = TransitionBatch.from_frames([bytes(f) for f in batch.to_frames()])
    assert back.games == ((5, 1.0), (-1, 0.5), (10, 0.0))
    assert TransitionBatch.from_frames([bytes(f) for f in tiny_batch().to_frames()]).games == ()
    for bad in ([(5, 0.7)], [(-2, 1.0)], [(True, 1.0)], [(5, True)]):
        with pytest.raises(ProtocolError) as err:
            TransitionBatch.from_frames(unchecked_frames(dataclasses.replace(tiny_batch(), games=tuple(bad))))
        assert err.value.field == "games"


def test_the_learner_rates_the_games_its_batches_report(tmp_path, built_learner):
    learner = built_learner(config_of(f"run.dir='{tmp_path}'", "actors.unroll_length=4"))
    pool = learner.publisher.pool
    learner.publish()  # version 0 is pooled (every 5th version), rated from the learning policy's rating
    assert pool.versions == (0,)
    batch = first_legal_unroll(learner.config, games=((0, 1.0), (0, 1.0), (-1, 0.0)))
    from tests.protocol.samples import unchecked_frames

    learner.intake.handle(unchecked_frames(batch))
    counters = learner.metrics.counters()
    assert counters["rated_games"] == 3 and counters["train_pool_win_rate"] == pytest.approx(2 / 3)
    assert counters["train_rating"] > 25 and counters["pool_size"] == 1
    learner.metrics.write()  # the learner's own metrics.jsonl (and TensorBoard) have them by their own names
    import json

    last = json.loads((tmp_path / "learner-default" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["rating"] == counters["train_rating"] and last["pool_win_rate"] == pytest.approx(2 / 3)


def first_legal_unroll(config, games: tuple) -> TransitionBatch:
    """The learning seat's first unroll of two Connect Four worlds whose seats all play the first legal column, as
    version 0, reporting `games`."""
    worlds = [make_world(config.env, env_api(config.env)) for _ in range(2)]
    rollout = MultiAgentRollout(worlds, "aec", policy_spaces(config, worlds[0]), 4, "actor-0", seed=0)
    while not rollout.outbox:
        rollout.tick(
            lambda p, obs, w: (first_legal(obs), {BEHAVIOUR_LOGP: np.zeros(len(obs), np.float32)}), {"default": 0}
        )
    rollout.close()
    return dataclasses.replace(rollout.outbox[0], policy_version=0, games=games)


def test_the_scripted_players_take_a_win_and_only_the_look_ahead_ones_block(examples_on_path):
    from connect_four_opponents import COLS, ROWS, careful, one_step_lookahead, take_wins

    def observation(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> np.ndarray:
        planes = np.zeros((ROWS, COLS, 2), np.float32)
        for row, col in mine:
            planes[row, col, 0] = 1
        for row, col in theirs:
            planes[row, col, 1] = 1
        return np.concatenate([planes.ravel(), np.ones(COLS, np.float32)])

    bottom = ROWS - 1
    can_win = observation([(bottom, 0), (bottom, 1), (bottom, 2)], [(bottom - 1, 0), (bottom - 1, 1)])
    must_block = observation([(bottom - 1, 0), (bottom - 1, 1)], [(bottom, 0), (bottom, 1), (bottom, 2)])
    assert take_wins(np.stack([can_win] * 20)).tolist() == [3] * 20
    assert one_step_lookahead(np.stack([can_win, must_block] * 10)).tolist() == [3, 3] * 10
    assert len(set(take_wins(np.stack([must_block] * 50)).tolist())) > 1  # no block: any legal column
    assert careful(np.stack([can_win, must_block] * 10)).tolist() == [3, 3] * 10
    # The opponent wins in column 3's second row once anything fills its bottom cell: only the careful player
    # keeps out of column 3 (every other column is safe); the look-ahead player plays there a seventh of the time.
    trap = observation(
        [(bottom, 0), (bottom, 6)], [(bottom - 1, 0), (bottom - 1, 1), (bottom - 1, 2), (bottom, 1), (bottom, 2)]
    )
    assert 3 not in careful(np.stack([trap] * 50)).tolist()
    assert 3 in one_step_lookahead(np.stack([trap] * 100)).tolist()


def test_the_evaluator_plays_the_fixed_opponent_and_reports_a_win_rate(examples_on_path):
    from tandem.daemons.evaluator.rounds import make_rounds
    from tandem.daemons.settings.setup_errors import SetupError

    config = config_of("eval.window_episodes=30", "selfplay.eval_opponent='connect_four_opponents:one_step_lookahead'")
    worlds = [make_world(config.env, env_api(config.env)) for _ in range(3)]
    rounds = make_rounds(worlds, "aec", config)
    rng = np.random.default_rng(1)

    def random_player(policy, obs, w, state=None):
        return np.array([rng.choice(np.flatnonzero(row[-7:] > 0)) for row in obs]), {}

    returns = rounds.play_round(random_player, 5, lambda: False, lambda: None)
    scores = returns[None]
    assert len(scores) >= 30 and set(scores) <= {0.0, 0.5, 1.0}
    # A random player against one that wins when it can and blocks: it loses nearly every game.
    assert np.mean(scores) < 0.2
    rounds.close()
    with pytest.raises(SetupError, match="selfplay.eval_opponent 'nowhere:x'"):
        make_rounds([make_world(config.env, "aec")], "aec", config_of("selfplay.eval_opponent='nowhere:x'"))


def position_after(columns) -> dict:
    """The observation ({observation, action_mask}) of the player to move after these moves from an empty board."""
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    for column in columns:
        env.step(column)
    obs = env.observe(env.agent_selection)
    env.close()
    return obs


def test_the_example_network_marks_where_each_legal_move_would_land(examples_on_path):
    import torch
    from connect_four_net import ROWS, playable
    from connect_four_opponents import drop

    obs = position_after((3, 3, 3, 2, 4, 0, 6, 6, 6, 6, 6, 6))  # column 6 ends full
    board = torch.as_tensor(obs["observation"], dtype=torch.float32)[None]
    marked = playable(board[..., 0], board[..., 1])[0].numpy() > 0
    occupied = obs["observation"].any(axis=-1)
    expected = np.zeros_like(marked)
    for column in np.flatnonzero(obs["action_mask"]):
        expected |= drop(np.zeros_like(occupied), occupied, column)  # the one cell a move there fills
    assert (marked == expected).all() and marked.sum() == 6 and not marked[:, 6].any()
    assert marked[ROWS - 1, 1] and marked[ROWS - 4, 3]  # the floor of an empty column; on top of three pieces


def test_the_mirror_network_answers_a_board_and_its_mirror_image_alike(examples_on_path):
    import torch
    from connect_four_net import COLS, make_mirror_net, make_net

    obs = position_after((3, 2, 2, 0, 6, 1))  # a lopsided position, so mirroring changes what the network sees
    board, mask = obs["observation"], obs["action_mask"].astype(np.float32)
    inputs = torch.as_tensor(np.concatenate([board.reshape(-1), mask]))[None].float()
    mirrored = torch.as_tensor(np.concatenate([board[:, ::-1].reshape(-1), mask[::-1]]))[None].float()
    model = config_of().model
    torch.manual_seed(0)
    for outputs in (COLS + 1, COLS, 1):  # shared policy and value; the policy alone; the value alone
        net = make_mirror_net(None, outputs, model)
        seen, flipped = net(inputs)[0], net(mirrored)[0]
        columns = COLS if outputs >= COLS else 0
        assert torch.allclose(seen[:columns], flipped[:columns].flip(0), atol=1e-5)
        assert torch.allclose(seen[columns:], flipped[columns:], atol=1e-5)
    plain = make_net(None, COLS + 1, model)
    assert not torch.allclose(plain(inputs)[0, :COLS], plain(mirrored)[0, :COLS].flip(0), atol=1e-5)


def test_the_mistake_count_names_a_win_not_taken_a_threat_not_blocked_and_a_win_handed_over(examples_on_path):
    from connect_four_mistakes import mistake

    def board(*cells):  # (row, column) pairs, row 0 the top
        b = np.zeros((6, 7), bool)
        for r, c in cells:
            b[r, c] = True
        return b

    legal = np.ones(7, bool)
    three = board((5, 0), (5, 1), (5, 2))
    assert mistake(three, board((4, 0), (4, 1)), legal, 3) is None  # makes four
    assert mistake(three, board((4, 0), (4, 1)), legal, 6) == "missed_win"
    assert mistake(board((4, 0), (4, 1)), three, legal, 3) is None  # blocks
    assert mistake(board((4, 0), (4, 1)), three, legal, 5) == "missed_block"
    # The opponent has three across row 4 (columns 1-3); (4, 0) and (4, 4) wait on the empty cells below them.
    theirs = board((4, 1), (4, 2), (4, 3), (5, 2))
    mine = board((5, 1), (5, 3))
    assert mistake(mine, theirs, legal, 4) == "gave_win"  # lands at (5, 4), and (4, 4) can be played
    assert mistake(mine, theirs, legal, 0) == "gave_win"
    assert mistake(mine, theirs, legal, 6) is None
    assert mistake(mine, theirs, np.eye(7, dtype=bool)[4], 4) is None  # the only legal move is no mistake


def test_tandem_eval_plays_a_checkpoint_against_random_a_scripted_player_or_another_checkpoint(
    tmp_path, examples_on_path
):
    from click.testing import CliRunner

    from tandem.client.api.evaluate import evaluate
    from tandem.client.cli import cli
    from tandem.daemons.checkpoints.files import save_checkpoint
    from tandem.daemons.config import render_toml

    run = tmp_path / "run"
    config = config_of(f"run.dir='{run}'")
    run.mkdir()
    (run / "config.toml").write_text(render_toml(config))
    spaces, world = spaces_and_world(config)
    world.close()
    algorithm = make_algorithm(config, spaces.observation_space, spaces.action_space, "cpu")
    save_checkpoint(run / "learner-default", {"algorithm": algorithm.state_dict(), "version": 3, "updates": 1})
    against_random = evaluate(run, episodes=20)  # a self-play run: its selfplay.eval_opponent, 'random'
    games = against_random["games"]
    assert against_random["against"] == "random" and games["wins"] + games["draws"] + games["losses"] >= 20
    assert against_random["return"]["mean"] == pytest.approx(
        (games["wins"] + 0.5 * games["draws"]) / sum(games.values())
    )
    scripted = evaluate(run, episodes=20, against="connect_four_opponents:one_step_lookahead")
    assert scripted["against"] == "connect_four_opponents:one_step_lookahead"
    assert scripted["return"]["mean"] < against_random["return"]["mean"]  # an untrained policy: the heuristic wins
    itself = evaluate(run, episodes=10, against=str(run / "learner-default"))
    assert sum(itself["games"].values()) >= 10
    result = CliRunner().invoke(cli, ["eval", str(run), "--episodes", "4", "--against", "nowhere"])
    assert result.exit_code != 0 and "--against 'nowhere': no such checkpoint" in result.output
    result = CliRunner().invoke(cli, ["eval", str(run), "--episodes", "4", "--against", "random"])
    assert result.exit_code == 0 and "against random:" in result.output and "win rate" in result.output


def test_the_selfplay_bench_writes_a_pool_a_learner_reads_back(tmp_path):
    from tandem.client.bench.examples import example_config
    from tandem.client.bench.selfplay import write_pool

    write_pool(example_config("connect_four_selfplay.toml"), tmp_path, 50, [f"run.dir='{tmp_path}'"])
    pool = OpponentPool(tmp_path / "learner-default" / "pool", every=1000000, size=50, counts={})
    pool.load()
    assert pool.versions == tuple(range(1, 51))
    first, second = (WeightBlob.from_frames(pool.frames(v)).tensors for v in (1, 2))
    assert any(not np.array_equal(first[name], second[name]) for name in first)  # 50 different opponents


def test_serial_mode_refuses_selfplay_by_name():
    from tandem.daemons.serial.loop import SerialRun
    from tandem.daemons.settings.setup_errors import SetupError

    with pytest.raises(SetupError, match=r"serial mode has no opponent pool.*\[selfplay\]"):
        SerialRun(config_of())
