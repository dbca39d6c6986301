"""Observations into a network as running statistics scale them (vectors per feature, images per pixel)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
import torch
from torch import nn

from tandem.daemons.algorithms.models import NatureCNN
from tandem.daemons.algorithms.net_parts import is_image_space
from tandem.daemons.algorithms.running_norm import RunningMeanStd

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.spec import VtraceSection

OBS_CLIP = 10.0  # normalized observations are clamped here (SB3's VecNormalize and cleanRL's default)
# Images are normalized per pixel after scaling to [0, 1], as Sample Factory's normalize_input: a pixel that
# never changes (the background) has variance 0, and epsilon 1e-5 sets how loud a change there is (a step of
# 1/255 becomes about 1.2) before the clip at 5 bounds it.
PIXEL_CLIP, PIXEL_EPSILON, PIXEL_SCALE = 5.0, 1e-5, 1.0 / 255.0


class NormalizedInputs(nn.Module):
    """Observations into a network, shifted and scaled by running statistics the learner keeps (or as they are).

    With `normalize_obs` (vectors) or `normalize_images` (images into a built-in CNN) the input is scaled per
    feature of a vector, per pixel of an image (after scaling to [0, 1]); the statistics are buffers, so they
    travel with the published weights, and the CNN then takes the normalized floats as they are.
    """

    pixel_scale: float
    obs_norm: RunningMeanStd | None

    def set_input_norm(
        self, obs_space: gym.Space, algo_cfg: VtraceSection, mask_size: int, nets: list[nn.Module]
    ) -> None:
        """Statistics for `obs_space` where the config asks for them; `nets` are the networks they feed."""
        self.images = is_image_space(obs_space)
        self.pixel_scale, self.obs_norm = 1.0, None
        if (
            self.images and algo_cfg.normalize_images and all(isinstance(net, NatureCNN) for net in nets)
        ):  # a network of the user's own gets the pixels as they are
            self.pixel_scale = PIXEL_SCALE
            self.obs_norm = RunningMeanStd(tuple(obs_space.shape), clip=PIXEL_CLIP, epsilon=PIXEL_EPSILON)
            for net in nets:  # the CNN must not scale the normalized floats again
                net.scale = False
        elif not self.images and algo_cfg.normalize_obs and isinstance(obs_space, gym.spaces.Box) and mask_size == 0:
            self.obs_norm = RunningMeanStd(tuple(obs_space.shape), clip=OBS_CLIP)

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
