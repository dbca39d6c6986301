"""A Dict observation's stacked image key (MiniGrid's view over the last steps) from the actor's link to the
learner's update: each view sent once (PROTOCOL.md 2.1.5), rebuilt exactly, checked and counted."""

from __future__ import annotations

import dataclasses
import logging

import gymnasium as gym
import numpy as np
import pytest
import torch
import zmq

from tandem.daemons.acting.link import PolicyLink
from tandem.daemons.algorithms.multi_input import ImageEncoder
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP, stack_unrolls
from tandem.daemons.envs.dict_obs import stack_candidates
from tandem.daemons.envs.key_stack import KeyFrameStack
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.learner.content import BatchContentCheck
from tandem.daemons.learner.intake import BadBatch
from tandem.daemons.runtime.endpoints import LearnerEndpoints
from tandem.protocol import TransitionBatch, stacks
from tests.daemons.envs.test_dict_obs import ENVS, STEPS, collect, doorkey_config, learner_of
from tests.frame_envs import STACK, Actor, TaggedDict
from tests.protocol.samples import unchecked_frames

pytestmark = pytest.mark.usefixtures("examples_on_path")

VIEWS = 3


def stacked_config(tmp_path, *more):
    return doorkey_config(
        tmp_path, "env.id='minigrid_dict:make_stacked'", f"env.kwargs={{id='MiniGrid-DoorKey-5x5-v0', stack={VIEWS}}}"
    )


@pytest.fixture
def link_of(tmp_path):
    """link_of(config) -> the actor's PolicyLink for its policy, on ipc endpoints nobody serves; closed after."""
    ctx = zmq.Context()
    made = []

    def build(config) -> PolicyLink:
        spaces = probe_policy_spaces(config)
        ends = LearnerEndpoints(*(f"ipc://{tmp_path}/{name}" for name in ("transitions", "weights", "snapshot")))
        made.append(PolicyLink(ctx, config, "default", spaces, ends, "actor-0", seed=0))
        return made[-1]

    yield build
    for link in made:
        link.close()
    ctx.destroy(linger=0)


def sent(link: PolicyLink, batch: TransitionBatch) -> TransitionBatch:
    return TransitionBatch.from_frames([bytes(f) for f in link.wire_form(batch).to_frames()])


def test_the_link_sends_each_view_once_and_the_learner_scores_the_actors_actions_on_them(tmp_path, link_of):
    """At lag 0 the learner's log pi(a|x) on the rebuilt stacks equals the actor's log mu(a|x) on the ones it saw;
    a policy whose logits depend strongly on the views makes any misplaced view, step or column show."""
    config = stacked_config(tmp_path)
    algorithm = learner_of(config)
    link = link_of(config)
    unrolls = collect(config, 3, algorithm.weights())
    assert unrolls[0].obs["image"].shape == (STEPS + 1, ENVS, VIEWS, 7, 7, 3)
    assert any(u.truncated.any() for u in unrolls)  # final observations' stacks are rebuilt too
    for whole in unrolls:
        got = sent(link, whole)
        assert got.obs_stacks == {"image": VIEWS} and got.obs["image"].shape == (STEPS + 1, ENVS, 7, 7, 3)
        assert got.obs["direction"].shape == (STEPS + 1, ENVS)  # not an image: whole, as before
        back = stacks.unpack(got)
        for key in whole.obs:
            assert back.obs[key].tobytes() == whole.obs[key].tobytes()
            assert back.final_obs[key].tobytes() == whole.final_obs[key].tobytes()
        d = stack_unrolls([back], algorithm.net.head, algorithm.device, 1.0)
        with torch.no_grad():
            _, learner_logp, _ = algorithm.evaluate_unrolls(d)
        np.testing.assert_allclose(learner_logp.numpy(), whole.extras[BEHAVIOUR_LOGP], atol=5e-5)
    assert link.key_stacks == {"image": VIEWS} and link.sent_whole == 0


def test_an_unstacked_view_that_looks_like_a_stack_travels_whole_and_is_tried_once(tmp_path, link_of, caplog):
    """MiniGrid's plain view is uint8 [7, 7, 3]: shaped like 7 frames of [7, 3], so it is a candidate; the first
    batch shows it is not one, and from then on it is not checked again."""
    config = doorkey_config(tmp_path)
    link = link_of(config)
    assert link.key_stacks == {"image": 7}
    batch = collect(config, 1, None)[0]
    with caplog.at_level(logging.INFO, logger="tandem.daemons.acting.link"):
        first = link.wire_form(batch)
    assert first is batch and link.key_stacks == {}
    assert "observation key 'image' travels whole" in caplog.text
    assert link.wire_form(batch) is batch


def test_the_learner_counts_a_framed_dict_batch_and_trains_on_the_rebuilt_stacks(tmp_path, built_learner, link_of):
    config = stacked_config(tmp_path)
    learner = built_learner(config)
    link = link_of(config)
    good = [dataclasses.replace(link.wire_form(u), policy_version=0) for u in collect(config, 2, None)]
    assert all(u.obs_stacks for u in good)
    counts = learner.progress.counts
    learner.intake.handle(unchecked_frames(good[0]))
    assert counts["batches_framed"] == 1 and counts["transitions_inserted"] == STEPS * ENVS, counts
    # The learner checks [S, *frame] against its policy's key: a view stacked 2 deep is not this policy's.
    short = dataclasses.replace(
        good[1],
        obs_stacks={"image": 2},
        obs_history={"image": np.ascontiguousarray(good[1].obs_history["image"][:, -1:])},
    )
    learner.intake.handle(unchecked_frames(short))
    assert counts["batches_malformed"] == 1 and counts["malformed_obs_shape"] == 1, counts
    assert learner.train_step() and np.isfinite(learner.training.last_metrics["loss"])


def test_a_float_stacked_key_with_nan_in_its_history_is_counted_as_values():
    """The actor stacks only uint8 image keys, but the wire takes any dtype: a float key's history is checked."""
    actor = Actor(2, seed=5, make=lambda source, seed, end: KeyFrameStack(TaggedDict(source, seed, end), "state", 3))
    space = actor.group.observation_space
    check = BatchContentCheck.of_space(space, lambda batch: None)
    packed, whole = stacks.pack_keys(actor.unroll(5), {"state": 3})
    assert whole == [] and packed.obs_stacks == {"state": 3}
    check(packed)
    bad = np.array(packed.obs_history["state"])
    bad[1, 0, 0] = np.nan
    with pytest.raises(BadBatch) as caught:
        check(dataclasses.replace(packed, obs_history={"state": bad}))
    assert caught.value.reason == "values" and "obs_history.state" in str(caught.value)


def test_only_image_shaped_uint8_keys_are_stack_candidates():
    space = gym.spaces.Dict(
        {
            "screen": gym.spaces.Box(0, 255, (4, 84, 84), np.uint8),
            "colour": gym.spaces.Box(0, 255, (3, 32, 32, 3), np.uint8),
            "vector": gym.spaces.Box(-1, 1, (4, 8), np.float32),
            "small": gym.spaces.Box(0, 255, (4, 8), np.uint8),
            "direction": gym.spaces.Discrete(4),
        }
    )
    assert stack_candidates(space, 64) == {"screen": 4, "colour": 3}
    assert stack_candidates(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), 64) == {}


def test_key_frame_stack_pads_with_the_first_view_and_refuses_a_missing_key():
    env = KeyFrameStack(TaggedDict(7, 0, end_prob=0.0), "screen", STACK)
    assert env.observation_space["screen"].shape == (STACK, 2, 3) and env.observation_space["state"].shape == (2,)
    first, _ = env.reset()
    assert [tuple(f[0]) for f in first["screen"]] == [(7, 1, 0)] * STACK and first["state"].shape == (2,)
    obs, *_ = env.step(0)
    obs, *_ = env.step(0)
    assert [tuple(f[0]) for f in obs["screen"]] == [(7, 1, 0), (7, 1, 0), (7, 1, 1), (7, 1, 2)]
    assert env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="no key 'camera'"):
        KeyFrameStack(TaggedDict(7, 0), "camera", 2)


@pytest.mark.parametrize("shape", [(3, 7, 7, 3), (3, 3, 7, 7)])
def test_a_stack_of_images_is_one_image_of_its_frames_channels(shape):
    """[S, H, W, C] and [S, C, H, W] both become S*C channels, frame by frame: the same views give the same
    features whichever layout they came in."""
    encoder = ImageEncoder(shape)
    views = torch.randint(0, 10, (2, 3, 7, 7, 3), dtype=torch.uint8)  # [B, S, H, W, C]
    x = views if shape[-1] == 3 else views.permute(0, 1, 4, 2, 3)
    side_by_side = views.permute(0, 1, 4, 2, 3).reshape(2, 9, 7, 7)  # [B, S*C, H, W], oldest frame first
    torch.testing.assert_close(encoder(x), encoder.convs(side_by_side.float()))
    assert encoder.width == encoder.convs(side_by_side.float()).shape[1]
