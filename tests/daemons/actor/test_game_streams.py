"""An action server's bookkeeping (pure logic): streams never mix games, episodes never span a reconnect."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from tandem.daemons.actor.serve.server import serve_endpoint
from tandem.daemons.actor.serve.stream_ids import reserve_stream_ids
from tandem.daemons.actor.serve.streams import AWAIT_RECENT_S, GameStreams, StepRefused, game_spaces
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.protocol.game import GameHello, GameStep

SPACES = PolicySpaces((), gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Discrete(2), 0)
T = 4


def streams(max_streams: int = 64) -> GameStreams:
    return GameStreams(SPACES, "actor-0", incarnation=5, unroll_length=T, max_streams=max_streams)


def obs(game: int, episode: int, t: int) -> np.ndarray:
    return np.array([game, episode, t], np.float32)


def answer(games: GameStreams, version: int = 3) -> None:
    for request in games.take_batch(1000):
        games.acted(request, np.int64(request.obs[2] % 2), version, {"logp": np.float32(-0.5)})


def test_streams_of_many_games_never_mix_and_no_unroll_spans_a_reconnect():
    games = streams()
    rng = np.random.default_rng(0)
    state = {}  # identity -> (game tag, stream, episode, t)
    tag = 0
    for tick in range(600):
        for identity in [b"a", b"b", b"c", b"d"]:
            if identity not in state or rng.random() < 0.01:  # (re)connect: a new hello, a new game tag
                tag += 1
                stream = games.hello(identity, GameHello(1, "g", 1), float(tick))[0]
                state[identity] = (tag, stream, 0, 0)
            game, stream, episode, t = state[identity]
            if t > 0 and rng.random() < 0.1:  # the episode ends; its last observation comes with the flags
                truncated = bool(rng.random() < 0.5)
                assert not games.step(
                    identity, GameStep(tick, stream, obs(game, episode, t), 1.0, not truncated, truncated), float(tick)
                )
                state[identity] = (game, stream, episode + 1, 0)
                continue
            assert games.step(identity, GameStep(tick, stream, obs(game, episode, t), 1.0), float(tick))
            state[identity] = (game, stream, episode, t + 1)
        answer(games)
    assert len(games.outbox) > 50
    tags_of_actor: dict[str, float] = {}
    for batch in games.outbox:
        batch.check_shapes()
        assert batch.num_envs == 1 and batch.num_steps == T and batch.incarnation == 5 and batch.policy_version == 3
        tags = set(batch.obs[:, 0, 0].tolist()) | set(batch.final_obs[:, 0].tolist())
        assert len(tags) == 1, f"{batch.actor_id} mixes games {tags}"
        assert tags_of_actor.setdefault(batch.actor_id, tags.pop()) == batch.obs[0, 0, 0]
        ended = batch.terminated[:, 0] | batch.truncated[:, 0]
        for t in range(T):
            episode, step = batch.obs[t, 0, 1:]
            nxt_episode, nxt_step = batch.obs[t + 1, 0, 1:]
            if ended[t]:
                assert (nxt_episode, nxt_step) == (episode + 1, 0)  # the next episode's first observation
            else:
                assert (nxt_episode, nxt_step) == (episode, step + 1)
        # a truncated episode's final observation is the step after the last action of that episode
        assert len(batch.final_obs) == int(batch.truncated.sum())
        assert np.array_equal(batch.extras["logp"], np.full((T, 1), -0.5, np.float32))
    assert len(set(tags_of_actor.values())) == len(tags_of_actor)  # one game per stream id


def test_ending_a_session_cuts_its_episodes_and_drops_its_unfinished_unroll():
    games = streams()
    stream = games.hello(b"x", GameHello(1, "g", 1), 0.0)[0]
    for t in range(T + 2):  # one full unroll and two steps of the next
        games.step(b"x", GameStep(t, stream, obs(1, 0, t), 1.0), 0.0)
        answer(games)
    assert len(games.outbox) == 1
    games.end(b"x", "games_left")
    assert games.counts["games_left"] == 1 and games.counts["episodes_cut"] == 1
    assert games.counts["steps_discarded"] == 2 and len(games.outbox) == 1 and games.open_streams == 0
    with pytest.raises(StepRefused) as refused:
        games.step(b"x", GameStep(9, stream, obs(1, 0, 9)), 0.0)
    assert refused.value.code == "no_session" and refused.value.fatal


def test_silence_ends_a_session_but_not_while_the_server_owes_it_an_action():
    games = streams()
    a = games.hello(b"a", GameHello(1, "g", 1), 0.0)[0]
    games.hello(b"b", GameHello(1, "g", 1), 0.0)
    games.step(b"a", GameStep(1, a, obs(1, 0, 0)), 0.0)  # waits for its action
    assert games.expire(10.0, timeout_s=5.0) == [b"b"]
    answer(games)
    assert games.expire(20.0, timeout_s=5.0) == [b"a"]
    assert games.counts["games_timed_out"] == 2


def test_a_hello_beyond_the_stream_limit_or_with_other_spaces_is_refused():
    games = streams(max_streams=3)
    games.hello(b"a", GameHello(1, "g", 2), 0.0)
    with pytest.raises(StepRefused) as refused:
        games.hello(b"b", GameHello(2, "g", 2), 0.0)
    assert refused.value.code == "server_busy"
    wrong = game_spaces(PolicySpaces((), gym.spaces.Box(0, 1, (3,), np.float64), gym.spaces.Discrete(2), 0))
    with pytest.raises(StepRefused, match=r"obs_dtype '<f8' != '<f4'") as refused:
        games.hello(b"b", GameHello(2, "g", 1, wrong), 0.0)
    assert refused.value.code == "space_mismatch"


def test_batches_go_when_full_when_every_stream_waits_when_steps_stop_or_at_the_deadline():
    games = streams()
    ids = games.hello(b"a", GameHello(1, "g", 3), 0.0)
    games.step(b"a", GameStep(1, ids[0], obs(1, 0, 0)), 0.0)
    assert not games.due(0.0004, wait_s=0.002, max_batch=8)
    assert games.due(0.0005, wait_s=0.002, max_batch=8)  # no step for a quarter of the wait: none is coming
    games.step(b"a", GameStep(2, ids[1], obs(1, 0, 0)), 0.0018)
    assert not games.due(0.0019, wait_s=0.002, max_batch=8)
    assert games.due(0.0021, wait_s=0.002, max_batch=8)  # the oldest waited its deadline, steps still coming
    assert games.due(0.0018, wait_s=0.002, max_batch=2)  # full
    games.step(b"a", GameStep(3, ids[2], obs(1, 0, 0)), 0.0018)
    assert games.due(0.0018, wait_s=0.002, max_batch=8)  # every open stream waits: nobody can add to it


def test_a_batch_does_not_wait_for_a_stream_whose_step_ended_an_episode():
    # Games stepping several streams in lock-step answer all their streams' actions before they start the next
    # episode of one that ended: waiting for it would hold every batch with an episode's end in it to the deadline.
    games = streams()
    ids = games.hello(b"a", GameHello(1, "g", 3), 0.0)
    for i, sid in enumerate(ids):
        games.step(b"a", GameStep(i, sid, obs(1, 0, 0)), 0.0)
    answer(games)
    assert not games.step(b"a", GameStep(5, ids[0], obs(1, 0, 1), 1.0, True), 0.0)  # the episode ended: no action
    games.step(b"a", GameStep(6, ids[1], obs(1, 0, 1), 1.0), 0.0)
    assert not games.due(0.0, wait_s=0.002, max_batch=8)  # ids[2] has not stepped yet
    games.step(b"a", GameStep(7, ids[2], obs(1, 0, 1), 1.0), 0.0)
    assert games.awaited == 2 and games.due(0.0, wait_s=0.002, max_batch=8)  # at once, not at the deadline
    answer(games)
    games.step(b"a", GameStep(8, ids[0], obs(1, 1, 0)), 0.0)  # its next episode: waited for again
    assert games.awaited == 3 and not games.due(0.0, wait_s=0.002, max_batch=8)
    games.end(b"a", "games_left")
    assert games.awaited == 0 and games.open_streams == 0


def test_serve_endpoints_per_actor(tmp_path):
    assert serve_endpoint("tcp://127.0.0.1:0", 3) == "tcp://127.0.0.1:*"
    assert serve_endpoint("tcp://127.0.0.1:7000", 2) == "tcp://127.0.0.1:7002"
    assert serve_endpoint("ipc:///tmp/g", 1) == "ipc:///tmp/g-1"
    # `ipc://` alone: a Unix socket beside the endpoint file in the run directory, refused where its path is too long
    assert serve_endpoint("ipc://", 2, tmp_path / "games") == f"ipc://{tmp_path}/games/actor-2.sock"
    with pytest.raises(ValueError, match="at most 107"):
        serve_endpoint("ipc://", 0, tmp_path / ("x" * 120))
    assert serve_endpoint("ipc:///" + "p" * 104, 9) == "ipc:///" + "p" * 104 + "-9"  # 107 bytes: the most there is
    with pytest.raises(ValueError, match="actor 10's socket .* at most 107"):
        serve_endpoint("ipc:///" + "p" * 104, 10)
    with pytest.raises(ValueError, match=r"actors\.serve\.bind"):
        serve_endpoint("udp://x", 0)


def test_a_serve_bind_beyond_loopback_needs_insecure_as_other_binds_do():
    from tandem.daemons.config import config_from_dict
    from tandem.daemons.supervisor.loop import SupervisorError, prepare

    exposed = config_from_dict({"actors": {"mode": "serve", "serve": {"bind": "tcp://0.0.0.0:7000"}}})
    with pytest.raises(SupervisorError, match="actors.serve.bind 'tcp://0.0.0.0:7000' is not loopback"):
        prepare(exposed, insecure=False, no_children=False)
    assert prepare(exposed, insecure=True, no_children=False).actors.serve.bind == "tcp://0.0.0.0:7000"
    local = config_from_dict({"actors": {"mode": "serve"}})
    assert prepare(local, insecure=False, no_children=False).actors.mode == "serve"


def test_a_serve_bind_no_actor_could_make_stops_the_run_before_it_starts(tmp_path):
    from tandem.daemons.config import config_from_dict
    from tandem.daemons.supervisor.loop import SupervisorError, prepare

    def served(run_dir, bind: str):
        return config_from_dict({"run": {"dir": str(run_dir)}, "actors": {"mode": "serve", "serve": {"bind": bind}}})

    with pytest.raises(SupervisorError, match="at most 107"):  # each actor would fail its bind, restart after restart
        prepare(served(tmp_path / ("deep" * 30), "ipc://"), insecure=False, no_children=False)
    with pytest.raises(SupervisorError, match="expected tcp://ADDRESS:PORT"):
        prepare(served(tmp_path, "tcp://127.0.0.1"), insecure=False, no_children=False)  # no port
    assert prepare(served(tmp_path, "ipc://"), insecure=False, no_children=False).actors.serve.bind == "ipc://"


def test_box_actions_and_uint8_observations_have_their_wire_spaces():
    box = game_spaces(
        PolicySpaces((), gym.spaces.Box(0, 255, (2, 3), np.uint8), gym.spaces.Box(-1.0, 1.0, (2,), np.float32), 0)
    )
    assert box.to_wire() == {
        "obs_shape": [2, 3],
        "obs_dtype": "|u1",
        "action_kind": "box",
        "action_n": 0,
        "action_shape": [2],
        "action_dtype": "<f4",
    }
    with pytest.raises(ValueError, match="Discrete or Box action space"):
        game_spaces(PolicySpaces((), gym.spaces.Box(0, 1, (3,), np.float32), gym.spaces.MultiBinary(3), 0))


def test_a_batch_stops_waiting_for_a_game_gone_quiet():
    games = streams()
    quiet = games.hello(b"quiet", GameHello(1, "g", 1), 0.0)  # connects, then disappears without a bye
    ids = games.hello(b"a", GameHello(1, "g", 1), 0.0)
    games.step(b"a", GameStep(1, ids[0], obs(1, 0, 0)), 0.0)
    assert not games.due(0.0, wait_s=0.002, max_batch=8)  # both games are new: the batch waits for the other
    games.acted(games.take_batch(8)[0], np.int64(0), 1, {})
    later = AWAIT_RECENT_S + 0.1
    games.step(b"a", GameStep(2, ids[0], obs(1, 0, 0), 1.0), later)
    games.expire(later, timeout_s=10.0)  # the quiet game is still open (no timeout yet) but not stepping
    assert games.open_streams == 2 and games.awaited == 1
    assert games.due(later, wait_s=0.002, max_batch=8)  # nobody else is likely to add to it: it goes at once
    games.acted(games.take_batch(8)[0], np.int64(0), 1, {})
    games.step(b"quiet", GameStep(1, quiet[0], obs(1, 0, 0)), later)  # it steps again
    games.expire(later + 0.1, timeout_s=10.0)
    assert games.awaited == 2
    games.end(b"a", "games_left")  # a game that stepped lately leaves: it is no longer waited for at once
    assert games.awaited == 1 and games.open_streams == 1


def test_a_step_waiting_when_its_session_ends_is_handed_back_to_be_answered():
    games = streams()
    ids = games.hello(b"a", GameHello(1, "g", 2), 0.0)
    games.step(b"a", GameStep(7, ids[0], obs(1, 0, 0)), 0.0)
    games.hello(b"a", GameHello(8, "g", 1), 0.0)  # a new hello ends the session the step belongs to
    assert [(r.request_id, r.session) for r in games.cancelled] == [(7, b"a")]
    assert games.pending == [] and games.counts["steps_cancelled"] == 1


def test_a_server_out_of_stream_ids_refuses_hellos_instead_of_reusing_one():
    games = GameStreams(SPACES, "actor-0", incarnation=5, unroll_length=T, max_streams=64, ids=range(10, 13))
    assert games.hello(b"a", GameHello(1, "g", 2), 0.0) == [10, 11]
    with pytest.raises(StepRefused) as refused:
        games.hello(b"b", GameHello(1, "g", 2), 0.0)
    assert refused.value.code == "server_busy" and refused.value.fatal
    assert games.hello(b"b", GameHello(1, "g", 1), 0.0) == [12]


def test_each_life_of_a_server_reserves_stream_ids_past_every_earlier_life(tmp_path):
    path = tmp_path / "games" / "actor-0.streams"
    first = reserve_stream_ids(path, block=100)
    second = reserve_stream_ids(path, block=100)
    assert (first.start, first.stop, second.start, second.stop) == (1, 101, 101, 201)
    assert path.read_text() == "201\n"
    path.write_text("garbage\n")
    with pytest.raises(ValueError, match="not the next free stream id"):
        reserve_stream_ids(path)


def test_each_stream_of_a_recurrent_policy_keeps_its_own_state_and_starts_each_episode_fresh():
    games = GameStreams(SPACES, "actor-0", incarnation=5, unroll_length=T, max_streams=8, state_size=2)
    a, b = games.hello(b"a", GameHello(1, "g", 2), 0.0)
    for t in range(2):  # two steps of both streams; each action leaves a state of its own stream behind
        for stream in (a, b):
            assert games.step(b"a", GameStep(t, stream, obs(0, 0, t), 1.0), 0.0)
        batch = games.take_batch(10)
        states = games.states(batch)
        expected = np.zeros((2, 2), np.float32) if t == 0 else np.array([[a, 1], [b, 1]], np.float32)
        np.testing.assert_array_equal(states, expected)  # what each stream's last action left, per stream
        for request in batch:
            games.acted(request, np.int64(0), 3, {}, np.array([request.stream, t + 1], np.float32))
    assert not games.step(b"a", GameStep(9, a, obs(0, 0, 2), 1.0, True), 0.0)  # stream a's episode ends
    for stream in (a, b):
        assert games.step(b"a", GameStep(10, stream, obs(0, 1, 0), 1.0), 0.0)
    batch = games.take_batch(10)
    np.testing.assert_array_equal(games.states(batch), [[0, 0], [b, 2]])  # a starts afresh, b goes on
    for request in batch:
        games.acted(request, np.int64(0), 3, {}, np.array([request.stream, 7], np.float32))
    for t in range(2 * T):  # until both streams have sent two whole unrolls
        for stream in (a, b):
            games.step(b"a", GameStep(20 + t, stream, obs(0, 1, t + 1), 1.0), 0.0)
        for request in games.take_batch(10):
            games.acted(request, np.int64(0), 3, {}, np.array([request.stream, 8 + t], np.float32))
    first = {batch.actor_id: batch for batch in games.outbox if batch.seq == 0}
    assert set(first) == {f"actor-0/g{a}", f"actor-0/g{b}"}
    for batch in first.values():
        np.testing.assert_array_equal(batch.core_state, np.zeros((1, 2), np.float32))  # each began fresh
        batch.check_shapes()
    later = [batch for batch in games.outbox if batch.seq == 1]
    assert len(later) == 2
    for batch in later:  # an unroll after the first begins from the state its stream had reached
        assert batch.core_state.shape == (1, 2) and batch.core_state[0, 0] == int(batch.actor_id.rsplit("g", 1)[1])
