"""CartPole that misbehaves on purpose inside chosen actors (the daemons import it as `module:callable`).

Each fault happens only in the actor whose index is given (told by $TANDEM_DAEMON), so the learner, which
builds one env to learn the spaces, and the other actors are unaffected. A fault that happens once leaves a
marker file holding the wall-clock time it began, so the drill can time detection from it and a restarted
actor does not repeat it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym

NOBODY = -1


def actor_index() -> int | None:
    name = os.environ.get("TANDEM_DAEMON", "")
    return int(name.removeprefix("actor-")) if name.startswith("actor-") else None


def claim(marker: Path) -> bool:
    """True for the first caller of all processes (the marker's creator); the marker then holds the time."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, repr(time.time()).encode())
    os.close(fd)
    return True


def hang() -> None:
    while True:  # like a native emulator stuck in a call: no Python exception will ever come out
        time.sleep(1)


class Hog(gym.Wrapper):
    """Keeps another 256 KiB alive (really touched) at every step, stepping at most 1000/s: a steady leak."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.kept: list[bytes] = []

    def step(self, action):
        self.kept.append(b"x" * (256 << 10))
        time.sleep(0.001)
        return self.env.step(action)


class HangInStep(gym.Wrapper):
    """Steps normally `after` times, then (once over all incarnations, by `marker`) never returns from step()."""

    def __init__(self, env: gym.Env, after: int, marker: Path):
        super().__init__(env)
        self.left, self.marker = after, marker

    def step(self, action):
        self.left -= 1
        if self.left < 0 and claim(self.marker):
            hang()
        return self.env.step(action)


def troubled(
    marker_dir: str,
    hang_build_once: int = NOBODY,
    hang_build: int = NOBODY,
    hang_step: int = NOBODY,
    hang_step_after: int = 500,
    leak: int = NOBODY,
) -> gym.Env:
    """CartPole, except in the actors named: the first build hangs, every build hangs, step() hangs once
    after `hang_step_after` steps of the first env, or every step leaks 256 KiB."""
    index = actor_index()
    markers = Path(marker_dir)
    if index is not None and index == hang_build_once and claim(markers / f"hang-build-once-{index}"):
        hang()
    if index is not None and index == hang_build:
        claim(markers / f"hang-build-{index}")  # the time of the first hang; every later build hangs too
        hang()
    env = gym.make("CartPole-v1")
    if index is not None and index == hang_step and not (markers / f"hang-step-{index}.built").exists():
        (markers / f"hang-step-{index}.built").touch()  # only the first of its envs hangs
        return HangInStep(env, hang_step_after, markers / f"hang-step-{index}")
    if index is not None and index == leak:
        return Hog(env)
    return env
