"""When a run ends: the [stop] conditions against a run's figures, in one place for `tandem up` and serial mode."""

from __future__ import annotations

from tandem.daemons.settings.schema import StopSection


def stop_reason(
    stop: StopSection,
    *,
    eval_return: float | None,
    mean_return: float | None,
    env_steps: int,
    elapsed_s: float,
) -> str | None:
    """Why the run should end now (a set `stop.*` condition is met), in the words status and the summary show, or
    None. `mean_return` is the mean of the last 100 episodes, None until there are that many (or, in serial mode,
    what its envs have finished); `env_steps` counts earlier starts too, so a resumed run ends where it would have."""
    if stop.eval_return is not None and eval_return is not None and eval_return >= stop.eval_return:
        return f"evaluation return {eval_return:.1f} >= {stop.eval_return:g}"
    if stop.mean_return is not None and mean_return is not None and mean_return >= stop.mean_return:
        return f"mean return of the last 100 episodes {mean_return:.1f} >= {stop.mean_return:g}"
    if stop.env_steps is not None and env_steps >= stop.env_steps:
        return f"{env_steps} env steps >= {stop.env_steps}"
    if stop.seconds is not None and elapsed_s >= stop.seconds:
        return f"{elapsed_s:.0f} s >= {stop.seconds:g} s"
    return None
