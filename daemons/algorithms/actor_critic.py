"""The on-policy network: a policy head and a value output built from `[model]`, with optional running normalizers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
import torch
from torch import nn

from tandem.daemons.algorithms.distributions import ActionHead
from tandem.daemons.algorithms.models import NatureCNN, build_q_network, is_image_space
from tandem.daemons.algorithms.running_norm import RunningMeanStd
from tandem.daemons.config.schema import ModelSection, RunConfig

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo import VtraceSection

POLICY_OUTPUT_GAIN = 0.01  # a near-uniform first policy (as PPO implementations initialise it)
OBS_CLIP = 10.0  # normalized observations are clamped here (SB3's VecNormalize and cleanRL's default)
# Images are normalized per pixel after scaling to [0, 1], as Sample Factory's normalize_input: a pixel that
# never changes (the background) has variance 0, and epsilon 1e-5 sets how loud a change there is (a step of
# 1/255 becomes about 1.2) before the clip at 5 bounds it.
PIXEL_CLIP, PIXEL_EPSILON, PIXEL_SCALE = 5.0, 1e-5, 1.0 / 255.0


class ActorCritic(nn.Module):
    """A policy network (distribution parameters) and a value network, each built from the `[model]` section.

    With `algorithm.shared_torso` one network gives both: its last layer has one output more, the value.
    With `normalize_obs` (vectors) or `normalize_images` (images into a built-in CNN) the input is scaled by
    running statistics the learner updates, per feature of a vector, per pixel of an image (after scaling to
    [0, 1]); they are buffers, so they travel with the published weights. The CNN then takes the normalized
    floats as they are. With `normalize_returns` the
    value output is in units of the value targets' running statistics, which the learner keeps (actors never
    need values).
    """

    def __init__(
        self,
        model_cfg: ModelSection,
        obs_space: gym.Space,
        action_space: gym.Space,
        algo_cfg: VtraceSection,
        mask_size: int = 0,
    ):
        super().__init__()
        self.head = ActionHead(action_space, algo_cfg.log_std_init, algo_cfg.state_dependent_std, mask_size)
        self.shared = algo_cfg.shared_torso
        outputs = self.head.num_outputs
        self.policy = build_q_network(model_cfg, obs_space, outputs + 1 if self.shared else outputs)
        self.value = None if self.shared else build_q_network(model_cfg, obs_space, 1)
        self.images = is_image_space(obs_space)
        self.pixel_scale, self.obs_norm = 1.0, None
        if (
            self.images
            and algo_cfg.normalize_images
            and all(isinstance(net, NatureCNN) for net in (self.policy, self.value) if net is not None)
        ):  # a network of the user's own gets the pixels as they are
            self.pixel_scale = PIXEL_SCALE
            self.obs_norm = RunningMeanStd(tuple(obs_space.shape), clip=PIXEL_CLIP, epsilon=PIXEL_EPSILON)
            for net in (self.policy, self.value):  # the CNN must not scale the normalized floats again
                if net is not None:
                    net.scale = False
        elif not self.images and algo_cfg.normalize_obs and isinstance(obs_space, gym.spaces.Box) and mask_size == 0:
            self.obs_norm = RunningMeanStd(tuple(obs_space.shape), clip=OBS_CLIP)
        last = last_linear(self.policy)
        if last is not None:  # only for built-in networks: a user's module keeps its own initialisation
            with torch.no_grad():  # the policy's outputs only (a shared network's value output is the last)
                last.weight[:outputs].mul_(POLICY_OUTPUT_GAIN)
                last.bias[:outputs].zero_()

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self.obs_norm is None else self.obs_norm.normalize(obs.float(), self.pixel_scale)

    def scaled(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as floats in the units the statistics are kept in (pixels in [0, 1])."""
        x = obs.float()
        return x * self.pixel_scale if self.pixel_scale != 1.0 else x

    @torch.no_grad()
    def update_obs_norm(self, obs: torch.Tensor, chunk_rows: int = 256) -> None:
        """Folds observations [B, *shape] into the statistics, in chunks: a batch of images as floats is large."""
        if self.obs_norm is None:
            return
        for start in range(0, obs.shape[0], chunk_rows):
            self.obs_norm.update(self.scaled(obs[start : start + chunk_rows]))

    def distribution(self, obs: torch.Tensor):
        out = self.policy(self.inputs(obs))
        return self.head.distribution(out[..., :-1] if self.shared else out, obs)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The most likely action, as `distribution(obs).mode()` (in the head's form), in fewer operations."""
        out = self.policy(self.inputs(obs))
        return self.head.mode(out[..., :-1] if self.shared else out, obs)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The value output (in normalized units with normalize_returns)."""
        if self.shared:
            return self.policy(self.inputs(obs))[..., -1]
        return self.value(self.inputs(obs)).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, policy_rows: int):
        """The distribution at the first `policy_rows` observations, the value at every one (one pass when shared)."""
        x = self.inputs(obs)  # normalized once for both networks
        if not self.shared:
            out = self.policy(x[:policy_rows])
            return self.head.distribution(out, obs[:policy_rows]), self.value(x).squeeze(-1)
        out = self.policy(x)
        return self.head.distribution(out[:policy_rows, :-1], obs[:policy_rows]), out[:, -1]


def last_linear(net: nn.Module) -> nn.Linear | None:
    """The output layer of a built-in network (MLP or Nature CNN), or None for anything else."""
    for attr in ("layers", "head"):
        seq = getattr(net, attr, None)
        if isinstance(seq, nn.Sequential) and isinstance(seq[-1], nn.Linear):
            return seq[-1]
    return None


def seeded_actor_critic(
    config: RunConfig, obs_space: gym.Space, action_space: gym.Space, mask_size: int, seed: int | None
) -> ActorCritic:
    if seed is None:
        return ActorCritic(config.model, obs_space, action_space, config.algorithm, mask_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ActorCritic(config.model, obs_space, action_space, config.algorithm, mask_size)
