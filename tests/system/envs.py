"""Environments that misbehave on purpose, for supervisor tests (imported by daemons as `module:callable`).

Each misbehaves only inside one actor (told by $TANDEM_DAEMON), so the learner, which builds
one env to learn the spaces, and the other actors are unaffected.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import gymnasium as gym

from tandem.client.chaos.envs import Hog, actor_index


def hang_once_in_actor(marker: str, index: int = 0) -> gym.Env:
    """The first env actor `index` builds never returns (like a native emulator stuck in init); later builds work."""
    if actor_index() == index:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return gym.make("CartPole-v1")
        while True:
            time.sleep(1)
    return gym.make("CartPole-v1")


def raise_in_actor(index: int = 0) -> gym.Env:
    """Actor `index` always fails to build its env; everyone else gets CartPole."""
    if actor_index() == index:
        raise RuntimeError("the emulator's ROM is missing (test env)")
    return gym.make("CartPole-v1")


def leak_in_actor(index: int = 0) -> gym.Env:
    env = gym.make("CartPole-v1")
    return Hog(env) if actor_index() == index else env


def hang_once_in_vector_worker(marker: str, index: int = 0) -> gym.Env:
    """In actor `index`'s AsyncVectorEnv workers (not the actor itself), the first build writes its pid and
    the actor's to `marker` and never returns; later builds work."""
    worker = multiprocessing.current_process().name.startswith("Worker<")
    if actor_index() == index and worker and not os.path.exists(marker):
        try:
            fd = os.open(marker + ".tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return gym.make("CartPole-v1")
        os.write(fd, f"{os.getpid()} {os.getppid()}".encode())  # this worker's pid and its actor's
        os.close(fd)
        os.rename(marker + ".tmp", marker)  # the test sees the marker only once it holds the pid
        while True:
            time.sleep(1)
    return gym.make("CartPole-v1")


def hog_in_constructor(index: int = 0, megabytes: int = 700) -> gym.Env:
    """Actor `index`'s constructor touches `megabytes` at once and then waits in native-like silence (no heartbeat)."""
    if actor_index() == index:
        kept = b"\x01" * (megabytes << 20)  # written, so resident
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.5)
        del kept
    return gym.make("CartPole-v1")
