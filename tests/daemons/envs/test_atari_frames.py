"""Real ALE games through the actor's stepping: stacks cut to frames, sent, and rebuilt exactly (PROTOCOL.md 2.1.2)."""

from __future__ import annotations

import numpy as np

from tandem.daemons.acting.stepping import make_stepping
from tandem.daemons.config.loader import config_from_dict
from tandem.daemons.envs.gym_envs import make_env
from tandem.daemons.replay import FrameReplay, NStepAccumulator, ReplayBuffer
from tandem.protocol import TransitionBatch, stacks

ENVS, UNROLL = 2, 8


def atari_config(game: str, max_steps: int):
    return config_from_dict(
        {
            "env": {
                "id": f"ALE/{game}-v5",
                "num_envs": ENVS,
                "max_episode_steps": max_steps,
                "kwargs": {"repeat_action_probability": 0.0},
                "atari": {"enabled": True},
            },
            "actors": {"unroll_length": UNROLL},
        }
    )


def play(
    game: str, max_steps: int, unrolls: int, incarnation: int, seed: int, explore=None, config=None, frames: bool = True
) -> list[TransitionBatch]:
    """What an actor would push: `unrolls` TransitionBatches of ENVS real, preprocessed, frame-stacked envs
    (actions uniform at random, or from `explore(obs) -> (actions, extras)` as an actor's policy gives them).
    The stepping keeps the stacks as frames (as an actor does), or with `frames` False whole (the reference)."""
    config = config or atari_config(game, max_steps)
    stepping = make_stepping(
        [make_env(config.env) for _ in range(ENVS)], "gymnasium", config, "actor-0", seed, incarnation
    )
    if not frames:
        stepping.frame_stack = 1
    rng = np.random.default_rng(seed)

    def choose(policy, obs, idx):
        return (rng.integers(0, stepping.spaces["default"].action_space.n, len(idx)), {})

    if explore is not None:

        def choose(policy, obs, idx):
            return explore(obs)

    try:
        while len(stepping.outbox) < unrolls:
            stepping.tick(choose, {"default": 0})
    finally:
        stepping.close()
    return stepping.outbox


def test_atari_stacks_survive_the_wire_across_lives_truncation_and_restarts():
    # Breakout loses lives (episodic life ends the learner's episode mid-game), a short limit truncates games,
    # and a second incarnation starts over with new envs.
    # The same seeds and actions give the same games, so the stepping's frames meet whole stacks of a second run.
    kept = play("Breakout", 60, 24, incarnation=0, seed=0) + play("Breakout", 60, 8, incarnation=1, seed=1)
    batches = play("Breakout", 60, 24, incarnation=0, seed=0, frames=False) + play(
        "Breakout", 60, 8, incarnation=1, seed=1, frames=False
    )
    assert sum(int(b.terminated.sum()) for b in batches) >= 2 and sum(int(b.truncated.sum()) for b in batches) >= 2
    replay = FrameReplay(10_000, (4, 84, 84), np.uint8, (), np.int64, 3, 0.99)
    ref, acc = ReplayBuffer(10_000, (4, 84, 84), np.uint8, (), np.int64), NStepAccumulator(3, 0.99)
    sent = 0
    for packed, batch in zip(kept, batches, strict=True):
        assert packed.obs_stack == 4, "the real wrapper's stacks must be kept as frames"
        np.testing.assert_array_equal(packed.obs_history, stacks.pack(batch, 4).obs_history)
        wire = [bytes(f) for f in packed.to_frames()]
        sent += sum(len(f) for f in wire)
        got = stacks.unpack(TransitionBatch.from_frames(wire))
        np.testing.assert_array_equal(got.obs, batch.obs)
        np.testing.assert_array_equal(got.final_obs, batch.final_obs)
        replay.add(TransitionBatch.from_frames(wire))
        ref.add(acc.add(batch))
    whole = sum(b.obs.nbytes + b.final_obs.nbytes for b in batches)
    assert sent < 0.4 * whole  # about a quarter: each frame once, plus obs[0]'s three older frames
    # Replay holds exactly the transitions whole stacks would give: no stack mixes episodes or incarnations.
    mine, theirs = replay.gather(replay.live_slots()), ref.gather(ref.live_slots())

    def key(cols, i):
        return (
            cols["obs"][i].tobytes(),
            cols["next_obs"][i].tobytes(),
            int(cols["actions"][i]),
            float(cols["returns"][i]),
            float(cols["discounts"][i]),
        )

    assert sorted(key(mine, i) for i in range(len(replay))) == sorted(key(theirs, i) for i in range(len(ref)))
    assert len(replay) > 0.9 * sum(b.num_transitions for b in batches)


def test_atari_envs_make_stacks_by_rule_so_actors_keep_frames_unchecked():
    """env.atari's outermost wrapper is FrameStackObservation: the stepping above keeps frames unchecked, so the
    test before this one is what shows that trust is safe (lives, truncation, restarts); env.vector stays checked."""
    config = atari_config("Pong", 40)
    stepping = make_stepping([make_env(config.env) for _ in range(ENVS)], "gymnasium", config, "actor-0", 0, 0)
    try:
        assert stepping.frame_stack == 4 and not stepping.stacks_checked
    finally:
        stepping.close()


def test_pong_batches_cut_to_frames_rebuild_exactly():
    kept = play("Pong", 40, 6, incarnation=3, seed=2)
    for packed, batch in zip(kept, play("Pong", 40, 6, incarnation=3, seed=2, frames=False), strict=True):
        assert packed.obs_stack == 4 and packed.obs.shape == (UNROLL + 1, ENVS, 84, 84)
        assert packed.obs_history.shape == (ENVS, 3, 84, 84)
        np.testing.assert_array_equal(stacks.unpack(packed).obs, batch.obs)


def test_the_actor_link_sends_atari_stacks_as_frames_and_anything_else_whole(tmp_path):
    import zmq

    from tandem.daemons.acting.link import PolicyLink
    from tandem.daemons.envs.spaces import PolicySpaces
    from tandem.daemons.runtime.endpoints import LearnerEndpoints

    config = config_from_dict({"env": {"id": "ALE/Pong-v5", "atari": {"enabled": True}}, "algorithm": {"name": "appo"}})
    env = make_env(config.env)
    spaces = PolicySpaces((), env.observation_space, env.action_space, 0)
    env.close()
    ends = LearnerEndpoints(*(f"ipc://{tmp_path}/{name}" for name in ("transitions", "weights", "snapshot")))
    ctx = zmq.Context()
    link = PolicyLink(ctx, config, "default", spaces, ends, "actor-0", seed=0)
    try:
        batch = play("Pong", 40, 1, incarnation=0, seed=4, frames=False)[0]
        assert link.wire_form(play("Pong", 40, 1, incarnation=0, seed=4)[0]).obs_stack == 4  # kept as frames: as is
        sent = TransitionBatch.from_frames([bytes(f) for f in link.wire_form(batch).to_frames()])
        assert sent.obs_stack == 4 and sent.obs.shape == (UNROLL + 1, ENVS, 84, 84)
        np.testing.assert_array_equal(stacks.unpack(sent).obs, batch.obs)
        odd = batch.obs.copy()
        odd[3, 0, 0] = 255 - odd[3, 0, 0]  # not a frame stack any more: goes whole, and is counted
        whole = link.wire_form(TransitionBatch(**{**batch.__dict__, "obs": odd}))
        assert whole.obs_stack == 1 and whole.obs is odd and link.sent_whole == 1
    finally:
        link.close()
        ctx.destroy(linger=0)


def test_an_appo_learner_scores_the_actors_actions_on_the_screens_the_actor_saw():
    """Real Breakout (lives lost, games truncated), the actor's APPO policy, frames once over the wire, the
    on-policy queue's rebuilt stacks: at lag 0 the learner's log pi(a|x) equals the actor's log mu(a|x), so
    every importance ratio is 1. A policy whose logits depend strongly on the pixels makes any misplaced
    frame, step or column show (a uniform policy would hide it)."""
    import torch

    from tandem.daemons.algorithms.appo.learner import APPO
    from tandem.daemons.algorithms.appo.policy import BEHAVIOUR_LOGP, StochasticPolicy
    from tandem.daemons.algorithms.unroll_tensors import stack_unrolls
    from tandem.daemons.feeds.unroll_feed import UnrollFeed

    config = config_from_dict(
        {
            "env": {
                "id": "ALE/Breakout-v5",
                "num_envs": ENVS,
                "max_episode_steps": 60,
                "kwargs": {"repeat_action_probability": 0.0},
                "atari": {"enabled": True},
            },
            "actors": {"unroll_length": UNROLL},
            "model": {"init": "orthogonal"},
            "algorithm": {"name": "appo", "shared_torso": True},
        }
    )
    env = make_env(config.env)
    spaces = env.observation_space, env.action_space
    env.close()
    learner = APPO(config, *spaces)
    with torch.no_grad():
        learner.net.policy.head[-1].weight.mul_(1000.0)  # undo the near-uniform start, and then some
    actor = StochasticPolicy(config, *spaces, seed=3)
    actor.load_weights(learner.weights())
    batches = play(
        "Breakout",
        60,
        16,
        incarnation=0,
        seed=2,
        explore=lambda obs: actor.explore(obs, np.zeros(len(obs))),
        config=config,
    )
    assert sum(int(b.terminated.sum()) for b in batches) >= 1 and sum(int(b.truncated.sum()) for b in batches) >= 1
    feed = UnrollFeed(batch_size=sum(b.num_transitions for b in batches), max_lag=0)
    for batch in batches:
        assert batch.obs_stack == 4  # kept as frames by the actor's stepping
        feed.add(TransitionBatch.from_frames([bytes(f) for f in batch.to_frames()]))
    unrolls = feed.next_batch(version=0)
    data = stack_unrolls(unrolls, learner.net.head, learner.device, 1.0)
    steps, n = data.rewards.shape
    with torch.no_grad():
        dist, _ = learner.net.evaluate(data.obs.reshape(-1, *data.obs.shape[2:]), steps * n)
        logp = dist.log_prob(data.actions.reshape(steps * n, -1)).reshape(steps, n)
    assert dist.entropy().mean() < 1.0  # far from uniform (log 4 = 1.39): the screens matter
    torch.testing.assert_close(logp, data.behaviour_logp, atol=1e-4, rtol=0)
    sent = np.concatenate([b.extras[BEHAVIOUR_LOGP] for b in batches], axis=1)
    np.testing.assert_array_equal(data.behaviour_logp.numpy(), sent)
