"""Episodes as MP4 files with OpenCV: H.264 where this OpenCV build encodes it (browsers play only that), else
MPEG-4 Part 2, said once in a note."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tandem.client.api.trained import PolicyError

log = logging.getLogger(__name__)
CODECS = ("avc1", "mp4v")  # H.264 first; MPEG-4 Part 2 is in every OpenCV build with an MP4 writer


class VideoWriter:
    """Frames of one episode into an MP4 file with OpenCV (a Tandem dependency; no moviepy needed)."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.writer = path, fps, None

    def add(self, env: Any) -> None:
        try:
            frame = np.asarray(env.render())
        except Exception as exc:  # an env's renderer may raise anything (no display, no pygame, ...)
            raise PolicyError(f"env.render() failed: {type(exc).__name__}: {exc}") from exc
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise PolicyError(f"env.render() gave {frame.dtype} {list(frame.shape)}, not an RGB image [H, W, 3] uint8")
        if self.writer is None:
            self.writer = open_writer(self.path, self.fps, (frame.shape[1], frame.shape[0]))
        self.writer.write(frame[:, :, ::-1])  # OpenCV wants BGR

    def close(self) -> None:
        if self.writer is not None:
            self.writer.release()


def open_writer(path: Path, fps: float, size: tuple[int, int]) -> Any:
    """An OpenCV writer of `path` in the first codec of CODECS this build can encode in."""
    import cv2

    for codec in CODECS[CODECS.index(usable_codec(size)) :]:
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), fps, size)
        if writer.isOpened():
            return writer
    raise PolicyError(f"OpenCV cannot write {path} (its MP4 writer is missing from this build)")


@functools.cache
def usable_codec(size: tuple[int, int]) -> str:
    """The codec episodes are written in, found once: avc1 if this OpenCV build encodes H.264, else mp4v with a
    note (the pip wheels of OpenCV come without an H.264 encoder)."""
    import cv2

    with tempfile.TemporaryDirectory(prefix="tandem-codec-") as folder, native_stderr_silenced():
        writer = cv2.VideoWriter(str(Path(folder) / "probe.mp4"), cv2.VideoWriter_fourcc(*"avc1"), 30.0, size)
        encodes = writer.isOpened()
        writer.release()
    if encodes:
        return "avc1"
    log.warning(
        "note: this OpenCV has no H.264 (avc1) encoder, so the videos are MPEG-4 Part 2 (mp4v), which browsers "
        "do not play (VLC and ffmpeg do; `ffmpeg -i episode-000.mp4 -c:v libx264 out.mp4` converts one)"
    )
    return "mp4v"


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Nothing written to file descriptor 2 meanwhile: a failed H.264 probe makes FFmpeg inside OpenCV print
    lines of errors that are not the user's."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
