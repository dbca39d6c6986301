"""Every array of a batch in a wrong shape, to every algorithm's learner: counted, dropped, and the learner goes on."""

from __future__ import annotations

import dataclasses

import msgpack
import numpy as np
import pytest

from tandem.daemons.config import load_config
from tandem.daemons.envs.dict_obs import is_dict_space, key_dtype, key_spaces
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.runtime.endpoints import learner_endpoints
from tandem.protocol import TransitionBatch, sockets
from tandem.protocol.limits import PROTOCOL_VERSION
from tandem.protocol.transitions import wire_message
from tests.protocol import samples
from tests.system.harness import ROOT, Collector, Procs, write_config

STEPS, ENVS = 5, 3  # unlike each other and every observation's sizes, so a transposed array changes shape
ON_POLICY = {"appo", "impala"}
ONE_UNROLL = f"algorithm.batch_size={STEPS * ENVS}"  # an on-policy update of one unroll
ALGORITHMS = {  # what a user runs -> (example, its overrides)
    "double_dqn": ("cartpole.toml", []),
    "appo": ("cartpole_appo.toml", [ONE_UNROLL]),
    "impala": ("cartpole_appo.toml", ["algorithm.name='impala'", ONE_UNROLL]),
    "sac": ("pendulum_sac.toml", []),
    "recurrent": ("cartpole_lstm.toml", [ONE_UNROLL]),
    "dict": ("minigrid_doorkey.toml", [ONE_UNROLL]),
}


def wrong_shapes(arr: np.ndarray) -> dict[str, np.ndarray]:
    """An array with an extra axis of 1, one axis missing, and its axes transposed (where that changes its shape)."""
    out = {"an extra axis of 1": arr[..., None]}
    if arr.ndim:
        out["a missing axis"] = arr[..., 0].copy()  # a [1] array becomes a scalar []
    if arr.ndim >= 2:
        for what, moved in (("reversed axes", arr.T), ("its last two axes swapped", np.swapaxes(arr, -1, -2))):
            if moved.shape != arr.shape:
                out[what] = np.ascontiguousarray(moved)
    return out


def sample_obs(space, lead: tuple[int, ...], rng) -> np.ndarray:
    """Observations of `space` (one key of a Dict's) for `lead` = [T+1, K] or [F]: small floats, integer zeros."""
    dtype = key_dtype(space)
    shape = (*lead, *(space.shape or ()))
    if dtype.kind == "f":
        return rng.uniform(-0.05, 0.05, shape).astype(dtype)
    return np.zeros(shape, dtype)


def good_batch(learner, seq: int) -> TransitionBatch:
    """What a client written from PROTOCOL.md sends this learner: its spaces, its extras, its recurrent state."""
    config, rng = learner.config, np.random.default_rng(seq)
    spaces = probe_policy_spaces(config)
    obs_space, action_space = spaces.observation_space, spaces.action_space
    truncated = np.zeros((STEPS, ENVS), bool)
    truncated[2, 1] = True  # one final observation: final_obs has a row to get wrong
    lead, final_lead = (STEPS + 1, ENVS), (1,)
    if is_dict_space(obs_space):
        keys = key_spaces(obs_space)
        obs = {k: sample_obs(s, lead, rng) for k, s in keys.items()}
        final = {k: sample_obs(s, final_lead, rng) for k, s in keys.items()}
    else:
        obs, final = sample_obs(obs_space, lead, rng), sample_obs(obs_space, final_lead, rng)
    action_space.seed(seq)
    actions = np.array([[action_space.sample() for _ in range(ENVS)] for _ in range(STEPS)])
    extras = {}
    if config.algorithm.name in ON_POLICY:
        extras["behaviour_logp"] = np.full((STEPS, ENVS), -0.7, np.float32)
    size = config.model.core_state_size()
    return TransitionBatch(
        policy_id="default",
        actor_id="actor-0",
        incarnation=1,
        seq=seq,
        policy_version=learner.progress.version,
        env_steps=seq * STEPS * ENVS,
        obs=obs,
        actions=actions,
        rewards=np.ones((STEPS, ENVS), np.float32),
        terminated=np.zeros((STEPS, ENVS), bool),
        truncated=truncated,
        final_obs=final,
        extras=extras,
        core_state=np.zeros((ENVS, size), np.float32) if size else None,
    )


def frames_of(batch: TransitionBatch) -> list[bytes]:
    return with_array(batch, "", None)


def with_array(batch: TransitionBatch, name: str, arr: np.ndarray | None) -> list[bytes]:
    """`batch` as it travels, with its array `name` replaced by `arr` in its place (None: left out; a name the
    batch lacks is added at the end)."""
    fields, arrays = wire_message(batch)
    if name and name not in [n for n, _ in arrays]:
        arrays.append((name, None))
    arrays = [(n, arr if n == name else a) for n, a in arrays]
    arrays = [(n, a) for n, a in arrays if a is not None]
    # encoded here as PROTOCOL.md 1 says (the reference encoder would send a scalar [] as [1])
    descriptors = [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape)} for n, a in arrays]
    header = {"v": PROTOCOL_VERSION, "kind": TransitionBatch.KIND, **fields, "arrays": descriptors}
    return [msgpack.packb(header, use_bin_type=True)] + [np.ascontiguousarray(a).tobytes() for _, a in arrays]


@pytest.fixture(params=list(ALGORITHMS))
def learner(request, tmp_path, built_learner, examples_on_path):
    example, overrides = ALGORITHMS[request.param]
    config = load_config(ROOT / "examples" / example, [f"run.dir='{tmp_path}'", *overrides])
    return built_learner(config)


def test_every_array_in_every_wrong_shape_is_counted_and_dropped_and_the_learner_goes_on(learner):
    counts = learner.progress.counts
    good = good_batch(learner, seq=0)
    learner.intake.handle(frames_of(good))
    taken = counts["transitions_inserted"]
    assert taken > 0 and counts["batches_malformed"] == 0, "the well-shaped batch is taken"
    sent = 0
    for name, arr in wire_message(good)[1]:
        for what, wrong in wrong_shapes(arr).items():
            before = dict(counts)
            learner.intake.handle(with_array(good, name, wrong))  # never raises: the intake thread would die
            sent += 1
            dropped = {
                k: counts[k] - before[k] for k in counts if k.startswith("malformed_") and counts[k] != before[k]
            }
            assert counts["batches_malformed"] == before["batches_malformed"] + 1, f"{name} with {what}"
            assert counts["transitions_inserted"] == taken, f"{name} with {what} went in"
            assert "malformed_insert" not in dropped, f"{name} with {what} passed every check: {dropped}"
    assert sent >= 20 and counts["batches_malformed"] == sent
    # Discrete actions with a trailing axis of 1 ([T, K, 1], not [T, K]), a Box's with one more: check 8
    before = counts["malformed_algorithm"]
    learner.intake.handle(with_array(good, "actions", good.actions[..., None]))
    assert counts["malformed_algorithm"] == before + 1
    learner.intake.handle(frames_of(good))  # the learner goes on: a good batch is taken and trained on
    assert counts["transitions_inserted"] == 2 * taken
    if learner.config.algorithm.name in ON_POLICY:
        assert learner.train_step() and np.isfinite(learner.training.last_metrics["loss"])


def test_a_recurrent_state_is_refused_where_the_policy_has_none_and_required_where_it_has_one(learner):
    """PROTOCOL.md 2.1.3: core_state exactly when the policy is recurrent, of its width (check 8)."""
    counts, good = learner.progress.counts, good_batch(learner, seq=0)
    size = learner.config.model.core_state_size()
    wrong = [np.zeros((ENVS, size + 1), np.float32), None] if size else [np.zeros((ENVS, 65536), np.float32)]
    for state in wrong:
        learner.intake.handle(with_array(good, "core_state", state))
    assert counts["malformed_algorithm"] == counts["batches_malformed"] == len(wrong)
    assert counts["transitions_inserted"] == 0


class BrokenReplay:
    """A feed whose insert fails as a missing check would make it fail: on the intake thread, after every check."""

    def __init__(self, feed):
        self.feed = feed

    def __getattr__(self, name):
        return getattr(self.feed, name)

    def insert(self, prepared):
        raise ValueError("actions: expected shape (112,), got (112, 1)")


@pytest.mark.parametrize("learner", ["double_dqn"], indirect=True)
def test_a_batch_the_feed_cannot_insert_is_counted_and_dropped_not_the_learner(learner, caplog):
    """The last line of defence: a check the learner lacks costs one batch, counted as malformed_insert."""
    learner.intake.feed = BrokenReplay(learner.intake.feed)
    good = good_batch(learner, seq=0)
    with caplog.at_level("ERROR", logger="tandem.daemons.learner.intake"):
        for seq in range(3):
            learner.intake.handle(frames_of(dataclasses.replace(good, seq=seq)))
    counts = learner.progress.counts
    assert counts["malformed_insert"] == counts["batches_malformed"] == 3 and counts["transitions_inserted"] == 0
    assert caplog.text.count("a check is missing") == 2  # the 1st and 2nd: rate-limited (then the 4th, 8th, ...)
    learner.intake.feed = learner.intake.feed.feed
    learner.intake.handle(frames_of(good))
    assert counts["transitions_inserted"] > 0


def test_a_live_learner_counts_bad_batches_from_a_real_socket_and_keeps_its_pid(tmp_path):
    """Item by item what a client written from PROTOCOL.md sent a `tandem` learner process: [T, K, 1] Discrete
    actions (once fatal on the intake thread: the replay insert raised) and a recurrent state to a feed-forward
    policy. Each is counted under malformed_algorithm; the same process then takes a good batch."""
    config, path = write_config(tmp_path, ["supervisor.heartbeat_interval_s=0.2", "learner.intake_thread=true"])
    collector, procs = Collector(), Procs(tmp_path / "logs")
    ctx = sockets.new_context()
    try:
        proc = procs.start("learner", "learner", str(path), "--control", collector.endpoint)
        name = "learner-default"
        collector.wait_for(lambda: getattr(collector.last(name), "stage", "") == "running", 60, "the learner", procs)
        assert collector.last(name).pid == proc.pid
        good = dataclasses.replace(
            samples.unroll(steps=STEPS, envs=ENVS, ends=[(2, 1, "truncated")]),
            obs=np.zeros((STEPS + 1, ENVS, 4), np.float32),
            final_obs=np.zeros((1, 4), np.float32),
            policy_version=int(collector.counter(name, "version")),
        )
        push = sockets.transitions_push(ctx, learner_endpoints(config).transitions)
        for frames in (
            with_array(good, "actions", good.actions[..., None]),
            with_array(good, "core_state", np.zeros((ENVS, 65536), np.float32)),
            frames_of(good),
        ):
            assert sockets.send_frames(push, frames, timeout_ms=10_000)
        collector.wait_for(
            lambda: collector.counter(name, "transitions_inserted", 0) > 0, 30, "the good batch to go in", procs
        )
        counters = collector.counters(name)
        assert counters["malformed_algorithm"] == counters["batches_malformed"] == 2
        assert counters["malformed_insert"] == counters["intake_errors"] == 0
        seq = collector.last(name).seq
        collector.wait_for(lambda: collector.last(name).seq >= seq + 5, 10, "five more heartbeats", procs)
        assert proc.poll() is None and collector.last(name).pid == proc.pid
        assert "intake thread died" not in procs.log("learner")
    finally:
        sockets.close_context(ctx, 0)
        procs.stop_all()
        collector.close()
