"""Samples the next replay batch while the current update runs, already as tensors on the learner's device."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import torch

from tandem.daemons.replay import SampledBatch

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.002  # nothing to sample yet (the limiter says wait): look again after this
JOIN_TIMEOUT_S = 5.0
# The columns the update turns into tensors; actions stay numpy (checked on the CPU), and so do versions
# and indices (lag and priorities are computed on the CPU).
TENSOR_COLUMNS = ("obs", "next_obs", "returns", "discounts", "weights")


class Prefetcher:
    """One sampled batch kept ready: the update never waits for the sampler or a host-to-device copy.

    Sampling holds the feed's lock (the receiver thread inserts under it); the tensor conversion does not.
    On CUDA the columns go through pinned memory on a side stream with non_blocking copies, and the
    training stream waits on an event before it reads them. Sampling one batch ahead means it is drawn
    with the priorities of one update earlier (as in Ape-X); the rate limiter counts it when drawn.
    """

    def __init__(self, feed: Any, lock: threading.Lock, device: str, current_version: Callable[[], int]):
        self.feed, self.lock, self.current_version = feed, lock, current_version
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.ready: queue.Queue[tuple[SampledBatch, Any]] = queue.Queue(maxsize=1)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def next(self) -> SampledBatch | None:
        """The prepared batch, or None if none is ready; raises if the prefetch thread died."""
        if self.error is not None:
            raise RuntimeError(f"the prefetch thread died: {self.error!r}") from self.error
        try:
            payload, event = self.ready.get_nowait()
        except queue.Empty:
            return None
        if event is not None:
            current = torch.cuda.current_stream(self.device)
            event.wait(current)
            for name in TENSOR_COLUMNS:  # the caching allocator must not reuse them while the update runs
                getattr(payload, name).record_stream(current)
        return payload

    def stop(self, timeout_s: float = JOIN_TIMEOUT_S) -> bool:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        return not self.thread.is_alive()

    def _run(self) -> None:
        try:
            while not self.stop_event.is_set():
                with self.lock:
                    sample = self.feed.next_batch(self.current_version())
                if sample is None:
                    self.stop_event.wait(IDLE_WAIT_S)
                    continue
                item = self.to_device(sample)
                while not self.stop_event.is_set():
                    try:
                        self.ready.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # noqa: BLE001 - reported to the training thread by next()
            self.error = exc
            log.exception("prefetch thread died")

    def to_device(self, sample: SampledBatch) -> tuple[SampledBatch, Any]:
        if not self.cuda:
            # Sampled columns are fresh copies: sharing their memory is safe and costs nothing.
            return dataclasses.replace(
                sample, **{n: torch.from_numpy(getattr(sample, n)) for n in TENSOR_COLUMNS}
            ), None
        with torch.cuda.stream(self.stream):
            moved = {
                n: torch.from_numpy(getattr(sample, n)).pin_memory().to(self.device, non_blocking=True)
                for n in TENSOR_COLUMNS
            }
            event = torch.cuda.Event()
            event.record(self.stream)
        return dataclasses.replace(sample, **moved), event
