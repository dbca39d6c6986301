"""The learner daemon: pulls and checks batches, fills replay, trains at a held ratio, publishes and serves weights."""

from __future__ import annotations

import logging
import math
import os
import threading
import time

import numpy as np
import torch

from tandem.daemons.algorithms import make_algorithm, make_feed
from tandem.daemons.algorithms.base import Feed
from tandem.daemons.config.policies import policy_config
from tandem.daemons.config.schema import RunConfig
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.learner.checkpoint import load_latest_checkpoint, save_checkpoint
from tandem.daemons.learner.content import BatchContentCheck
from tandem.daemons.learner.intake import Intake
from tandem.daemons.learner.metrics_log import MetricsLog
from tandem.daemons.learner.pace import PaceMeter
from tandem.daemons.learner.prefetch import Prefetcher
from tandem.daemons.learner.snapshots import SnapshotServer, serve_snapshots
from tandem.daemons.learner.version_floor import read_floor, write_floor
from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.endpoints import bind_endpoints, is_loopback, learner_endpoints, socket_options
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.runtime.paths import run_dir
from tandem.daemons.runtime.reporter import TRAIN_PREFIX, Reporter
from tandem.daemons.runtime.signals import StopFlag
from tandem.daemons.runtime.torch_threads import set_torch_threads
from tandem.daemons.security.curve import gatekeeper_for
from tandem.protocol import WeightBlob, sockets

log = logging.getLogger(__name__)
IDLE_POLL_MS = 5
FIRST_CHECKPOINT_S = 10.0  # the first checkpoint after start, whatever learner.checkpoint_interval_s says


class Learner:
    """One learner process for one policy; see `run()` for the loop."""

    def __init__(
        self,
        config: RunConfig,
        policy_id: str,
        stop: StopFlag,
        control_endpoint: str | None,
        device: str | None = None,
        bind: str | None = None,
        insecure: bool = False,
    ):
        # This policy's view of the run: its own algorithm, model and learner overrides, and its own ports.
        self.config, self.policy_id, self.stop = policy_config(config, policy_id), policy_id, stop
        self.bind_base, self.insecure = bind, insecure
        self.gatekeeper = None  # the ZAP handler, when this learner binds with CURVE
        self.link = "loopback"  # what status shows for its links: curve, loopback or insecure
        self.public_key = ""
        self.next_register = 0.0
        self.device = device or config.learner.device
        self.name = f"learner-{policy_id}"
        self.dir = run_dir(config) / self.name
        self.ctx = sockets.new_context()
        self.channel = ControlChannel(self.ctx, control_endpoint, socket_options(config)) if control_endpoint else None
        self.reporter = Reporter("learner", self.name, config.supervisor.heartbeat_interval_s, self.channel)
        self.counts = {
            "batches_received": 0,
            "batches_malformed": 0,
            "batches_stale": 0,
            "batches_foreign": 0,
            "batches_over_ratio": 0,
            "transitions_inserted": 0,
            "updates": 0,
            "snapshots_served": 0,
            "checkpoints": 0,
            "snapshot_requests_refused": 0,
            "disk_write_failures": 0,
        }
        self.version = -1
        self.latest_frames: list | None = None
        # The feed is shared by the training thread and, with learner.intake_thread, the receiver thread.
        self.feed_lock = threading.Lock()
        self.intake_threaded = False
        # The snapshot socket is served on its own thread while the loop runs (inline before, in tests).
        self.snapshots = SnapshotServer(policy_id, self.counts)
        self.snapshots_threaded = False
        self.prefetcher: Prefetcher | None = None
        self.lag_mean = 0.0
        self.last_metrics: dict[str, float] = {}
        self.env_steps_before = 0  # transitions received by earlier incarnations (from the checkpoint)
        self.last_checkpoint: float | None = None
        self.metrics: MetricsLog | None = None
        self.pace = PaceMeter(self.config.learner.pace_headroom, expected_streams=self.config.actors.count)

    # ------------------------------------------------------------------ set-up

    def build(self) -> None:
        cfg = self.config
        set_torch_threads(cfg.learner.torch_threads)
        self.reporter.set_stage("build")
        spaces = probe_policy_spaces(cfg, self.policy_id)
        obs_space, action_space, mask_size = spaces.observation_space, spaces.action_space, spaces.mask_size
        self.obs_shape = tuple(obs_space.shape or ())
        self.algorithm = make_algorithm(cfg, obs_space, action_space, self.device, mask_size=mask_size)
        if hasattr(self.algorithm, "progress"):  # heartbeats between the steps of a long update (see Algorithm)
            self.algorithm.progress = self.reporter.tick
        self.feed: Feed = make_feed(cfg, obs_space, action_space)
        self.check_content = BatchContentCheck(
            self.obs_shape, obs_space.dtype or np.float32, self.algorithm.check_batch
        )
        self.intake = Intake(
            self.feed,
            self.feed_lock,
            self.policy_id,
            self.check_content,
            cfg.learner.max_lag,
            lambda: self.version,
            self.counts,
            heard=self.pace.heard,
        )
        self.consumed_per_update = self.feed.consumed_per_update
        if self.feed.credit_pacing and cfg.learner.pace_credit:
            self.pace.credit_per_version = int(self.consumed_per_update) if cfg.learner.pace_headroom > 0 else 0
        self.reporter.set_stage("load_checkpoint")
        self.dir.mkdir(parents=True, exist_ok=True)
        state = load_latest_checkpoint(self.dir)
        if state is not None:
            self.algorithm.load_state_dict(state["algorithm"])
            self.counts["updates"] = int(state.get("updates", 0))
            self.version = int(state.get("version", -1))
            self.env_steps_before = int(state.get("env_steps", 0))
            if state.get("replay"):
                self.feed.load_state_dict(
                    {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in state["replay"].items()}
                )
            log.info("resumed from checkpoint: version %d, %d updates", self.version, self.counts["updates"])
        # Versions only go up, across restarts too: start above anything published before.
        self.version = max(self.version, read_floor(self.dir / "version")) + 1
        self.metrics = MetricsLog(self.dir / "metrics.jsonl", self.dir / "tensorboard")

    def bind(self) -> None:
        self.reporter.set_stage("bind")
        endpoints = bind_endpoints(self.bind_base) if self.bind_base else learner_endpoints(self.config)
        opts = socket_options(self.config)
        planned = [endpoints.transitions, endpoints.weights, endpoints.snapshot]
        exposed = [e for e in planned if not is_loopback(e) and not sockets.uses_curve(e, opts.curve)]
        if exposed and not self.insecure:
            raise ValueError(
                f"binding {exposed[0]} exposes the learner beyond this machine without keys: set "
                "security.key_dir (`tandem keys create`) for CurveZMQ, or pass --insecure"
            )
        self.gatekeeper = gatekeeper_for(self.ctx, self.config, planned)  # before the binds: ZAP fails closed
        self.link = sockets.link_security(endpoints.transitions, opts.curve)
        self.public_key = opts.curve.public_key.decode() if opts.curve else ""  # registered: actors check it
        self.transitions_pull = sockets.transitions_pull(self.ctx, endpoints.transitions, opts)
        self.weights_pub = sockets.weights_pub(self.ctx, endpoints.weights, opts)
        self.snapshot_router = sockets.snapshot_router(self.ctx, endpoints.snapshot, opts)
        self.endpoints = {
            "transitions": sockets.bound_endpoint(self.transitions_pull),
            "weights": sockets.bound_endpoint(self.weights_pub),
            "snapshot": sockets.bound_endpoint(self.snapshot_router),
        }
        log.info("bound %s%s", self.endpoints, " (INSECURE: no authentication)" if exposed else "")
        self.register()

    def register(self) -> None:
        """Tell the supervisor where this learner is, so actors can find it (repeated: supervisors restart too)."""
        self.next_register = time.monotonic() + 5.0
        if self.channel is not None:
            self.channel.send(
                "register",
                {
                    "name": self.name,
                    "role": "learner",
                    "policy": self.policy_id,
                    "endpoints": self.endpoints,
                    "insecure": self.link == "insecure",
                    "link": self.link,
                    "public_key": self.public_key,
                    "host": self.reporter.host,
                    "pid": os.getpid(),
                },
            )

    # ------------------------------------------------------------------ the loop

    def run(self) -> int:
        started = False
        try:
            self.build()
            self.bind()
            self.publish()  # the first version (initial or restored weights) so actors can start at once
            self.reporter.set_stage("running")
            started = True
            self.loop()
        except Exception as exc:
            self.reporter.failed(exc)
            raise
        finally:
            if started:
                self.reporter.set_stage("checkpoint")
                self.checkpoint()
                # The final counts: a run that ends between two once-a-second rows still records its last updates.
                self.write_metrics()
            self.reporter.set_stage("stopping")
            self.reporter.tick()
            if self.metrics is not None:
                self.metrics.close()
            self.reporter.close()
            if self.gatekeeper is not None:
                self.gatekeeper.stop()
            sockets.close_context(self.ctx, linger_ms=0)
        return 0

    def loop(self) -> None:
        """Receive, train, serve snapshots, register, checkpoint, record metrics and report, until stopped."""
        self.start_threads()
        try:
            self.loop_body()
        finally:
            self.stop_threads()

    def loop_body(self) -> None:
        # The first checkpoint soon after start: a learner killed before a full interval must not come back
        # with random weights under a higher version.
        next_checkpoint = time.monotonic() + min(FIRST_CHECKPOINT_S, self.config.learner.checkpoint_interval_s)
        next_metrics = 0.0
        while not self.stop:
            if self.intake_threaded:
                self.intake.check()  # a dead receiver thread fails the learner loudly: the supervisor restarts it
                received = 0
            else:
                received = self.receive()
            with self.feed_lock:
                fill_before = self.feed.fill()
            trained = self.train_step()
            now = time.monotonic()
            # Starved: wanted to train and had no data.
            # The buffer's fill for this pass: the middle of its fill before and after the update.
            self.pace.tick(
                now,
                self.consumed_per_update if trained else 0.0,
                starved=not trained,
                fill=(fill_before + self.feed.fill()) / 2,
            )
            if self.snapshots_threaded:
                self.snapshots.check()
            else:
                self.serve_snapshots()
            if now >= self.next_register:
                self.register()
                if self.gatekeeper is not None:
                    self.gatekeeper.poll()  # SIGHUP asked for the allow-list again
            if now >= next_checkpoint:
                self.checkpoint()
                next_checkpoint = now + self.config.learner.checkpoint_interval_s
            if now >= next_metrics:
                lag = self.intake.take_lag_mean()
                if lag is not None:
                    self.lag_mean = lag
                self.write_metrics()
                next_metrics = now + 1.0
            self.reporter.update(self.counters())
            self.reporter.tick(now)
            if not received and not trained:
                waited = [] if self.intake_threaded else [self.transitions_pull]
                if not self.snapshots_threaded:
                    waited.append(self.snapshot_router)
                if waited:
                    sockets.poll(waited, IDLE_POLL_MS)
                else:
                    time.sleep(IDLE_POLL_MS / 1000)

    def start_threads(self) -> None:
        """learner.intake_thread: the receiver thread takes the transitions socket (this thread never touches it
        again); learner.prefetch: replay batches are sampled one update ahead."""
        cfg = self.config.learner
        self.snapshots.offer(self.version, self.latest_frames)
        self.snapshots.start(self.snapshot_router)
        self.snapshots_threaded = True
        if cfg.intake_thread:
            self.intake.start(self.transitions_pull)
            self.intake_threaded = True
        if cfg.prefetch and self.feed.can_prefetch:
            self.prefetcher = Prefetcher(self.feed, self.feed_lock, self.device, lambda: self.version)
            self.prefetcher.start()

    def stop_threads(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.stop()
        if self.intake_threaded:
            self.intake.stop()
        if self.snapshots_threaded:
            self.snapshots.stop()

    def receive(self) -> int:
        """Inline intake (learner.intake_thread off): handle up to a few waiting batches between two updates."""
        return self.intake.drain(self.transitions_pull)

    def insert(self, frames: list) -> None:
        """Decode, check and insert one received message on this thread (see Intake.handle)."""
        self.intake.handle(frames)

    @property
    def lag_window(self) -> list:
        return self.intake.lag_window

    def train_step(self) -> bool:
        if self.prefetcher is not None:
            payload = self.prefetcher.next()
        else:
            with self.feed_lock:
                payload = self.feed.next_batch(self.version)
        if payload is None:
            return False
        result = self.algorithm.update(payload)
        with self.feed_lock:
            self.feed.after_update(payload, result)
        self.intake.made_room()
        self.counts["updates"] += 1
        self.last_metrics = {k: float(v) for k, v in result.metrics.items()}
        self.last_metrics["sample_lag_mean"] = self.feed.lag_of(payload, self.version)
        if self.counts["updates"] % self.feed.publish_every == 0:
            self.version += 1
            self.publish()
        return True

    def publish(self) -> None:
        pace_per_s, streams = self.pace.advice(time.monotonic(), filling=self.feed.filling())
        blob = WeightBlob.build(
            self.policy_id,
            self.version,
            self.counts["updates"],
            self.algorithm.weights(),
            pace_per_s,
            streams,
            self.pace.credit_per_version,
            env_steps=self.env_steps,
        )
        self.latest_frames = blob.to_frames()
        self.snapshots.offer(self.version, self.latest_frames)
        sockets.send_frames(self.weights_pub, self.latest_frames)
        try:
            write_floor(self.dir / "version", self.version)
        except OSError as exc:  # a full disk: keep training and publishing; the checkpoints say it too
            self.disk_failed("the version floor", exc)

    @property
    def env_steps(self) -> int:
        """Transitions received for this policy over the run, earlier incarnations included (sent with each version)."""
        return self.env_steps_before + int(self.counts["transitions_received"])

    def serve_snapshots(self) -> None:
        serve_snapshots(self.snapshot_router, self.policy_id, self.version, self.latest_frames, self.counts)

    def disk_failed(self, what: str, exc: OSError) -> None:
        """A write under the run directory failed (a full disk): counted and shown, never the end of training."""
        self.counts["disk_write_failures"] += 1
        log_dropped(log, f"a write of {what} in {self.dir}", self.counts["disk_write_failures"], exc)

    def write_metrics(self) -> None:
        """One line of metrics.jsonl; a full disk is counted and shown, never the end of training."""
        try:
            # the diagnostics once, by their own names (the heartbeat's train_ copies are for the supervisor)
            counters = {k: v for k, v in self.counters().items() if not k.startswith(TRAIN_PREFIX)}
            self.metrics.write(self.counts["updates"], {**counters, **self.last_metrics})
        except OSError as exc:
            self.disk_failed("the metrics", exc)

    def checkpoint(self) -> bool:
        """Save a checkpoint; False (counted, shown, logged) when the disk refuses it: the last good one stays."""
        try:
            self._checkpoint()
        except OSError as exc:
            self.disk_failed("a checkpoint", exc)
            return False
        return True

    def _checkpoint(self) -> None:
        state = {
            "algorithm": self.algorithm.state_dict(),
            "version": self.version,
            "updates": self.counts["updates"],
            "env_steps": self.env_steps,
        }
        with self.feed_lock:  # the receiver thread must not change replay while it is written out
            saved = self.feed.state_dict()
            if saved:
                state["replay"] = {
                    k: torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
                    for k, v in saved.items()
                }
                save_checkpoint(self.dir, state)
        if not saved:
            save_checkpoint(self.dir, state)
        self.counts["checkpoints"] += 1
        self.last_checkpoint = time.monotonic()

    def counters(self) -> dict[str, float]:
        with self.feed_lock:
            feed_counters = self.feed.counters()
        return {
            **self.counts,
            **feed_counters,
            **self.pace.counters(),
            "version": self.version,
            "batches_stale": self.counts["batches_stale"] + self.feed.dropped_stale,
            "lag_mean": self.lag_mean,
            "loss": self.last_metrics.get("loss", 0.0),
            "checkpoint_age_s": time.monotonic() - self.last_checkpoint if self.last_checkpoint else -1.0,
            "sample_lag_mean": self.last_metrics.get("sample_lag_mean", 0.0),
            # the last update's diagnostics (losses, entropy, KL, clip fraction, explained variance, ...):
            # the supervisor puts them in the run's curves as train/NAME
            **{TRAIN_PREFIX + k: v for k, v in self.last_metrics.items() if math.isfinite(v)},
        }
