"""Play episodes with a trained policy on its run's env (built as the evaluator builds it) and sum them up."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tandem.client.api.policy import load_policy, locate, read_run_config
from tandem.client.api.trained import PolicyError, TrainedPolicy
from tandem.client.api.video import VideoWriter
from tandem.daemons.envs.fixed_players import fixed_player
from tandem.daemons.evaluator.kept import KEPT_FILES
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.settings.agents import policy_names
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.settings.setup_errors import SetupError

VIDEO_FPS = 30  # when the env's metadata names no render_fps


def summary(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, np.float64)
    return {
        "mean": float(array.mean()),
        "std": float(array.std()),
        "min": float(array.min()),
        "max": float(array.max()),
    }


def build_env(config: RunConfig, render: str | None) -> Any:
    """One env of the run as the evaluator has it (Atari: whole games, true rewards), rendering if asked."""
    from tandem.daemons.envs.gym_envs import EnvBuildError, make_env

    env_cfg = config.env
    if render:
        env_cfg = dataclasses.replace(env_cfg, kwargs={**env_cfg.kwargs, "render_mode": render})
    try:
        return make_env(env_cfg, training=False)
    except EnvBuildError as exc:
        raise PolicyError(f"cannot build the env: {exc}") from exc


def play_gym(
    policy: TrainedPolicy,
    config: RunConfig,
    episodes: int,
    seed: int,
    sample: bool,
    render: str | None,
    video: Path | None,
) -> dict[str, Any]:
    """Episode i starts from reset(seed=seed + i); returns and lengths in agent steps."""
    env = build_env(config, render)
    returns, lengths = [], []
    try:
        fps = float(env.metadata.get("render_fps") or VIDEO_FPS)
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            policy.reset()  # a recurrent policy starts each episode from a fresh state
            writer = VideoWriter(video / f"episode-{i:03d}.mp4", fps) if video else None
            total, length, done = 0.0, 0, False
            try:
                while not done:
                    if writer:
                        writer.add(env)
                    action = policy.act(obs, sample=sample)
                    obs, reward, terminated, truncated, _ = env.step(action.item() if np.ndim(action) == 0 else action)
                    total, length, done = total + float(reward), length + 1, terminated or truncated
                if writer:
                    writer.add(env)
            finally:
                if writer:
                    writer.close()
            returns.append(total)
            lengths.append(length)
    finally:
        env.close()
    return {"returns": returns, "lengths": lengths, "return": summary(returns), "length": summary(lengths)}


def play_world(
    source: Path,
    policy: TrainedPolicy,
    episodes: int,
    seed: int,
    sample: bool,
    checkpoint: str | None = None,
    against: str | None = None,
) -> dict[str, Any]:
    """A PettingZoo world with every policy of the run acting; `episodes` world episodes (as the evaluator counts).

    The other policies play their `checkpoint` of the run (a kept file given as the source names its kind).
    With `against` (or in a self-play run), the policy plays one seat against that opponent in the others and
    the return is its win rate (see `opponent_of`)."""
    from tandem.client.api.export import SPEC_FILE
    from tandem.daemons.acting.stepping import env_builder
    from tandem.daemons.evaluator.rounds import make_rounds

    config = policy.spec.config
    if (source / SPEC_FILE).is_file():
        raise PolicyError(
            f"{source} is an exported policy of a multi-agent world; `tandem eval` needs the run "
            "directory to play every policy of the world",
            ExitCode.USAGE,
        )
    policies = {policy.name: policy}
    if source.is_file():
        checkpoint = next((kind for kind, file in KEPT_FILES.items() if source.name == file), None)
    for name in policy_names(config):
        if name not in policies:
            policies[name] = load_policy(
                source if source.is_dir() else source.parent.parent, name, checkpoint=checkpoint
            )
    config = dataclasses.replace(config, eval=dataclasses.replace(config.eval, window_episodes=episodes))
    if against is not None or config.selfplay.enabled:  # the policy asked for plays (a league's any member)
        config = dataclasses.replace(config, selfplay=dataclasses.replace(config.selfplay, policy=policy.name))
    api, build_one = env_builder(config, training=False)
    opponent = opponent_of(against, policy, sample, seed)
    try:
        rounds = make_rounds([build_one()], api, config, opponent)
    except SetupError as exc:
        raise PolicyError(str(exc), ExitCode.USAGE) from exc

    def choose(
        name: str, obs: np.ndarray, env_index: np.ndarray, state: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        # obs [B, ...]: already flattened by the world; a recurrent policy's agents' states come with them
        if state is None:
            return policies[name].act(obs, sample=sample), {}
        return policies[name].act(obs, sample=sample, state=state), {}

    try:
        returns = rounds.play_round(choose, seed, lambda: False, lambda: None)
    finally:
        rounds.close()
    if rounds.scores is not None:  # seated against an opponent: each game's score, 1 a win, 0.5 a draw, 0 a loss
        scores = returns[None]
        games = {name: sum(s == value for s in scores) for name, value in (("wins", 1), ("draws", 0.5), ("losses", 0))}
        label = against or config.selfplay.eval_opponent
        return {"returns": scores, "return": summary(scores), "games": games, "against": label}
    agents = {agent: summary(values) for agent, values in returns.items() if values}
    # The policy's return in each episode: the mean over the agents it plays (one list per agent, an entry
    # per episode), so the headline's spread is over episodes, not over a single mean.
    own = [returns[a] for a in rounds.spaces[policy.name].agents if returns.get(a)]
    episodes_played = min((len(values) for values in own), default=0)
    mine = [float(np.mean([values[i] for values in own])) for i in range(episodes_played)]
    everything = [r for values in returns.values() for r in values]
    return {"returns": mine or everything, "return": summary(mine) if mine else summary(everything), "agents": agents}


def opponent_of(against: str | None, policy: TrainedPolicy, sample: bool, seed: int) -> Any:
    """The player `--against` names: another checkpoint (a run directory, checkpoint file or exported directory,
    playing as `policy` is played), or 'random' / 'module:callable' (as selfplay.eval_opponent takes them);
    None without one (then a self-play run's evaluator opponent plays)."""
    if against is None:
        return None
    if Path(against).exists():
        other = load_policy(Path(against), policy.name if Path(against).is_dir() else None, seed=seed + 1)
        return lambda obs: other.act(obs, sample=sample)
    if against == "random" or ":" in against:
        spec = policy.spec
        actions = int(getattr(spec.action_space, "n", 0))
        try:
            return fixed_player(against, spec.mask_size, actions, seed, key="--against")
        except SetupError as exc:
            raise PolicyError(str(exc), ExitCode.USAGE) from exc
    raise PolicyError(
        f"--against {against!r}: no such checkpoint or run directory, and not 'random' or 'module:callable'",
        ExitCode.USAGE,
    )


def default_policy(source: Path) -> str | None:
    """A multi-agent run's first policy when none is named (every policy of the world plays anyway), else None."""
    try:
        if source.is_dir():
            names = policy_names(read_run_config(locate(source, None)[0]))
            return names[0] if len(names) > 1 else None
    except PolicyError:  # load_policy says what is wrong
        pass
    return None


def no_display() -> str:
    """Why a window cannot open here ('' when it can): on Linux, no X11 or Wayland display in the environment."""
    if not sys.platform.startswith("linux") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return ""
    return "neither DISPLAY nor WAYLAND_DISPLAY is set"


def evaluate(
    source: str | Path,
    policy: str | None = None,
    episodes: int = 10,
    seed: int = 0,
    sample: bool = False,
    render: str | None = None,
    video: str | Path | None = None,
    device: str = "cpu",
    checkpoint: str | None = None,
    against: str | None = None,
) -> dict[str, Any]:
    """Play `episodes` episodes (greedy unless `sample`) and report returns and lengths with their mean and std.

    `checkpoint` picks a run directory's 'latest' (default), 'best' or 'solved' checkpoint (see load_policy)."""
    from tandem.daemons.envs.worlds import MULTI_AGENT_APIS, env_api

    if render == "human" and (why := no_display()):
        raise PolicyError(
            f"--render human opens a window, but there is no display here ({why}): record the episodes with "
            "--video DIR instead (or run where a display is)",
            ExitCode.USAGE,
        )
    source = Path(source)
    trained = load_policy(source, policy or default_policy(source), device=device, seed=seed, checkpoint=checkpoint)
    config = trained.spec.config
    video_dir = Path(video) if video else None
    if video_dir:
        if render not in (None, "rgb_array"):
            raise PolicyError(
                "--video records rgb_array frames; leave out --render or give --render rgb_array", ExitCode.USAGE
            )
        render = "rgb_array"
        video_dir.mkdir(parents=True, exist_ok=True)
    if env_api(config.env) in MULTI_AGENT_APIS:
        if render or video_dir:
            raise PolicyError(
                "--render and --video are for gymnasium envs; a PettingZoo world is not rendered here", ExitCode.USAGE
            )
        result = play_world(source, trained, episodes, seed, sample, checkpoint, against)
    elif against is not None:
        raise PolicyError("--against is for games of several seats (a PettingZoo env)", ExitCode.USAGE)
    else:
        result = play_gym(trained, config, episodes, seed, sample, render, video_dir)
    return {
        "policy": trained.name,
        "algorithm": trained.algorithm,
        "version": trained.version,
        "checkpoint": trained.spec.source,
        "env": config.env.id,
        "episodes": episodes,
        "seed": seed,
        "greedy": not sample,
        **result,
        **({"video": str(video_dir)} if video_dir else {}),
        **({"evaluation": trained.spec.evaluation} if trained.spec.evaluation else {}),
    }
