"""A learner's weight versions on their way out: the weights PUB, the snapshot socket's copy, the version floor."""

from __future__ import annotations

from collections.abc import Callable

from tandem.daemons.learner.binding import Binding
from tandem.daemons.learner.disk import LearnerDisk
from tandem.daemons.learner.opponent_pool import OpponentPool
from tandem.daemons.learner.progress import Progress
from tandem.daemons.learner.snapshots import SnapshotServer
from tandem.daemons.learner.version_floor import read_floor, write_floor
from tandem.protocol import sockets


class Publisher:
    """Sends each version to the subscribed actors and hands it to the snapshot thread for late joiners.

    Versions only go up, across restarts too: `start_above` puts the first one above the restored
    checkpoint's and above the floor on disk (the highest ever published), which each `send` rewrites.
    """

    def __init__(
        self, policy_id: str, progress: Progress, disk: LearnerDisk, binding: Binding, pool: OpponentPool | None = None
    ):
        self.progress, self.disk, self.binding = progress, disk, binding
        self.latest_frames: list | None = None
        self.pool = pool if pool is not None else OpponentPool(disk.dir / "pool", 0, 1, progress.counts)
        # The snapshot socket is served on its own thread while the loop runs.
        self.snapshots = SnapshotServer(policy_id, progress.counts, self.pool)

    def start_above(self, restored: int) -> None:
        self.progress.version = max(restored, read_floor(self.disk.dir / "version")) + 1

    def publish(self, frames_of_version: Callable[[], list]) -> None:
        """Build the current version's frames and send them."""
        self.send(frames_of_version())

    def send(self, frames: list) -> None:
        """The current version's weight blob, as frames: published, offered to late joiners, its floor written."""
        self.latest_frames = frames
        self.snapshots.offer(self.progress.version, frames)
        sockets.send_frames(self.binding.weights_pub, frames)
        try:
            write_floor(self.disk.dir / "version", self.progress.version)
        except OSError as exc:  # a full disk: keep training and publishing; the checkpoints say it too
            self.disk.failed("the version floor", exc)
        else:
            self.disk.wrote("the version floor")
        try:
            self.pool.offer(self.progress.version, frames)
        except OSError as exc:  # the pool goes without this version; opponents are drawn from the others
            self.disk.failed("an opponent pool snapshot", exc)

    def start(self) -> None:
        """Hand the snapshot socket to its thread (from now on only that thread touches it)."""
        self.snapshots.offer(self.progress.version, self.latest_frames)
        self.snapshots.start(self.binding.snapshot_router)

    def check(self) -> None:
        """Raise if the snapshot thread died: actors could no longer join (the supervisor restarts the learner)."""
        self.snapshots.check()

    def stop(self) -> None:
        self.snapshots.stop()
