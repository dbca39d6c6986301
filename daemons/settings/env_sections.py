"""The sections that say what is played and with what network: [env] (with [env.atari], [env.pixels]) and [model]."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tandem.daemons.settings.option import option


@dataclass
class AtariSection:
    """[env.atari]: the standard Atari preprocessing around an ALE env (ale-py), for actors and the evaluator."""

    enabled: bool = option(
        False, "Wrap env.id (an 'ALE/Game-v5' id built with frameskip=1) in the preprocessing below."
    )
    noop_max: int = option(30, "Up to this many no-op actions after each reset (random starts).", min=0)
    frame_skip: int = option(4, "Each action repeats this many frames; the last two are max-pooled.", min=1)
    screen_size: int = option(84, "Frames are resized to screen_size x screen_size.", min=36)
    grayscale: bool = option(True, "Grayscale frames (one channel) instead of RGB.")
    frame_stack: int = option(4, "Observations are the last this many frames, [stack, H, W] uint8.", min=1)
    episodic_life: bool = option(True, "Training only: a lost life ends the learner's episode (the game goes on).")
    clip_rewards: bool = option(True, "Training only: rewards become their sign; reported returns stay the game's own.")
    fire_reset: bool = option(
        False,
        "Press FIRE (then UP) after each reset and, in training, after each lost life, in games that have a FIRE "
        "action, as Sample Factory's, cleanRL's and SB3's Atari wrappers do; the agent need not learn to serve.",
    )

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are this section's stacks of S > 1 frames ([S, ...]), else 1 (sent whole)."""
        stacked = self.enabled and self.frame_stack > 1 and tuple(obs_shape)[:1] == (self.frame_stack,)
        return self.frame_stack if stacked else 1


@dataclass
class PixelsSection:
    """[env.pixels]: frame skip, grayscale, resize and frame stack around any env whose observation is an image."""

    enabled: bool = option(
        False,
        "Wrap env.id (any env whose observation is an HxWxC or HxW uint8 Box of 0-255; for an ALE "
        "id use [env.atari]) in the preprocessing below.",
    )
    frame_skip: int = option(
        4, "Each action repeats this many frames, rewards summed; the last two are max-pooled (1: none).", min=1
    )
    screen_size: int = option(84, "Frames are resized to screen_size x screen_size.", min=8)
    grayscale: bool = option(
        True,
        "Grayscale frames [H, W]; false keeps colour, each frame [C, H, W] and a stack [stack*C, H, W] "
        "(sent whole: only single-channel stacks travel as frames).",
    )
    frame_stack: int = option(
        4, "Observations are the last this many frames, [stack, H, W] uint8 (channels first).", min=1
    )
    clip_rewards: bool = option(False, "Training only: rewards become their sign; reported returns stay the env's own.")

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are this section's stacks of S > 1 single-channel frames ([S, H, W]), else 1."""
        shape = tuple(obs_shape)
        stacked = self.enabled and self.frame_stack > 1 and len(shape) == 3 and shape[0] == self.frame_stack
        return self.frame_stack if stacked else 1


@dataclass
class EnvSection:
    """[env]: what each actor steps."""

    id: str = option("CartPole-v1", "A gymnasium id, or 'module:callable' returning an env.")
    kwargs: dict[str, Any] = option({}, "Keyword arguments passed to gymnasium.make or the callable.")
    num_envs: int = option(8, "Environments per actor (K); one batched inference steps all of them.", min=1, max=4096)
    max_episode_steps: int = option(0, "Truncate episodes after this many steps; 0 keeps the env's own limit.", min=0)
    api: str = option(
        "auto",
        "'gymnasium', PettingZoo 'aec' or 'parallel'; 'auto' tells them apart by what env.id builds.",
        choices=("auto", "gymnasium", "aec", "parallel"),
    )
    vector: str = option(
        "",
        "How an actor steps its K gymnasium envs: '' its own loop, 'sync'/'async' gymnasium's Sync/AsyncVectorEnv, 'envpool' EnvPool, 'ale' ale-py's Atari vector env.",
        choices=("", "sync", "async", "envpool", "ale"),
    )
    max_entities: int = option(
        64,
        "Entity observations: the most entities of one type an observation may hold (each type is padded to it "
        "inside the learner; the wire carries only the entities present).",
        min=1,
        max=4096,
    )
    atari: AtariSection = field(default_factory=AtariSection)
    pixels: PixelsSection = field(default_factory=PixelsSection)

    @property
    def games(self) -> bool:
        """The envs report whole games in info (the Atari and pixel wrappers' GameReturn): returns are those."""
        return self.atari.enabled or self.pixels.enabled

    def frames_per_obs(self, obs_shape: tuple) -> int:
        """S when observations are [env.atari]'s or [env.pixels]'s stacks of S > 1 frames, else 1 (sent whole)."""
        return max(self.atari.frames_per_obs(obs_shape), self.pixels.frames_per_obs(obs_shape))


@dataclass
class ModelSection:
    """[model]: the network every policy of the run uses."""

    kind: str = option(
        "auto", "'auto' (MLP for vectors, Nature CNN for images), 'mlp', 'nature_cnn' or 'module:callable'."
    )
    hidden_sizes: list[int] = option([128, 128], "Hidden layer widths of the MLP.", min=1)
    activation: str = option("relu", "Activation of the MLP.", choices=("relu", "tanh", "elu"))
    init: str = option(
        "torch",
        "Initial weights of a built-in network: 'torch' (PyTorch's defaults), 'orthogonal' (gain sqrt(2) for "
        "hidden layers, as PPO implementations start their Atari CNNs; a policy's outputs x0.01) or "
        "'orthogonal_unit' (gain 1 for every layer, a policy's outputs too: Sample Factory's default).",
        choices=("torch", "orthogonal", "orthogonal_unit"),
    )
    core: str = option(
        "none",
        "A recurrent core after the network (on-policy algorithms): 'lstm' or 'gru' carry a state from step to "
        "step, so the policy can remember what one observation does not show; 'none' is feed-forward.",
        choices=("none", "lstm", "gru"),
    )
    core_size: int = option(
        64, "Width of the recurrent core's state (an LSTM keeps two of this width).", min=1, max=4096
    )
    entity_width: int = option(64, "Entity observations: width of each entity's embedding and attention.", min=4)
    entity_layers: int = option(2, "Entity observations: self-attention layers over the entities.", min=0, max=32)
    entity_heads: int = option(
        2, "Entity observations: attention heads per layer (entity_width must be a multiple).", min=1
    )
    entity_origin: str = option(
        "",
        "Entity observations: where positions are measured from: '' as they are, an entity type's name (its first "
        "entity, as EntityGym's translation does for the player), or 'global' (the global features at the same "
        "places). The features entity_position names are shifted by it for every type.",
    )
    entity_position: list[int] = option(
        [0, 1], "Entity observations: which features of each entity (and of the origin) are its position.", min=0
    )
    entity_relpos: list[int] = option(
        [],
        "Entity observations: relative positions inside attention (EntityGym's trainer's relpos_encoding): for each "
        "entity_position feature, the largest offset between two entities told apart (farther ones count as that "
        "far), e.g. [10, 10] on a grid. Each offset has a learned key and value, shared by the attention layers; "
        "the cost grows with the square of the entities a step. [] leaves it out.",
        min=1,
        max=1000,
    )
    entity_relpos_scale: float = option(
        1.0,
        "Entity observations: model.entity_relpos counts offsets in steps of this many position units (offsets are "
        "divided by it, then rounded): 1 on a grid of whole cells, larger where positions run in hundreds.",
        above=0.0,
    )
    entity_heading: int = option(
        -1,
        "Entity observations: which feature of the origin (model.entity_origin) is its heading in radians; positions "
        "relative to it are then turned so that the origin faces +x (EntityGym's rotation_angle_feature: 'ahead' "
        "means the same to a vehicle facing any way). Needs two entity_position features; -1 turns nothing.",
        min=-1,
    )

    def core_state_size(self) -> int:
        """Floats of recurrent state one env carries: 0 without a core, core_size for a GRU, twice that for an LSTM."""
        if self.core == "none":
            return 0
        return self.core_size * (2 if self.core == "lstm" else 1)
