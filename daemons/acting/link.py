"""What an actor or evaluator holds for one policy: its network and the weights it follows; actors add a push socket."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tandem.daemons.acting.backlog import JoiningBacklog
from tandem.daemons.acting.weights_client import WeightsClient
from tandem.daemons.algorithms import algorithm_of, make_policy
from tandem.daemons.config.policies import policy_config
from tandem.daemons.envs.dict_obs import stack_candidates
from tandem.daemons.envs.spaces import PolicySpaces
from tandem.daemons.runtime.endpoints import LearnerEndpoints, learner_socket_options
from tandem.daemons.runtime.logs import log_dropped
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch, sockets, stacks
from tandem.protocol.transitions import MAX_OBS_STACK

log = logging.getLogger(__name__)


class FollowedPolicy:
    """A policy's network kept at the newest verified weight version its learner published.

    `poll()` never blocks; it swaps a whole new version in or leaves the network as it was, so callers
    poll only where a version may change (between unrolls for actors, between rounds for evaluators).
    """

    def __init__(
        self,
        ctx: Any,
        config: RunConfig,
        policy: str,
        spaces: PolicySpaces,
        endpoints: LearnerEndpoints,
        requester: str,
        seed: int | None,
    ):
        self.policy_id = policy
        self.net = make_policy(
            config, spaces.observation_space, spaces.action_space, seed=seed, mask_size=spaces.mask_size
        )
        self.ctx, self.config, self.requester = ctx, config, requester
        self.endpoints = endpoints
        self.weights = self.weights_client(endpoints)
        self.version = -1
        self.env_steps = 0  # the env steps behind the loaded version, as its learner counted them (0: unknown)
        self.pool: tuple[int, ...] = ()  # the versions its learner keeps as self-play opponents, as of that version
        self.tensors: dict[str, Any] = {}  # the weights loaded into `net` (whatever the algorithm's policy keeps)
        # the newest version's insert budget: (transitions/s, actors, credit per version, version, train step)
        self.pace: tuple[float, int, int, int, int] = (0.0, 0, 0, -1, -1)

    def poll(self) -> bool:
        """Load a newer version if one arrived; True when one did."""
        blob = self.weights.poll()
        if blob is None:
            return False
        try:
            check_finite(blob.tensors)
            self.net.load_weights(blob.tensors)  # ValueError naming the tensor when it does not fit this network
        except ValueError as exc:
            # A peer's message never ends this process: the blob is counted and the current weights stay.
            self.weights.counters["blobs_rejected"] += 1
            log_dropped(log, f"weights version {blob.version}", self.weights.counters["blobs_rejected"], exc)
            return False
        self.tensors = dict(blob.tensors)
        self.version = blob.version
        self.env_steps = blob.env_steps
        self.pool = blob.pool
        self.pace = (blob.pace_per_s, self.sharing(blob.pace_streams), blob.pace_credit, blob.version, blob.train_step)
        return True

    def sharing(self, streams: int) -> int:
        """The actors this one shares its learner's advice with. A replica's actors share ITS update, not replica
        0's (each replica trains on a whole batch of its own), so the share of a version's credit is the batch over
        the actors feeding this actor's replica, as the supervisor counted them at the lookup. With replica 0's
        count alone, a replica fed by fewer actors than replica 0 got less than an update a version, and the group,
        which updates together, waited on it until the credit expired. The smaller of the two: a count made before
        every replica had registered may be too high, and too small a share stalls the group where too large a
        one only costs what the queue throws away."""
        feeders = self.endpoints.feeders
        return min(feeders, streams) if feeders and streams else feeders or streams

    def silent_s(self, now: float) -> float:
        """Seconds since anything came from the learner (it answers a snapshot request every weights_refresh_s)."""
        return now - self.weights.heard_at

    def reconnect(self, endpoints: LearnerEndpoints) -> None:
        """Follow the learner to new addresses (restarted on other ports or another host); versions go on rising."""
        old = self.weights
        self.weights = self.weights_client(endpoints)
        self.weights.version, self.weights.counters = old.version, old.counters
        old.close()
        self.endpoints = endpoints

    def weights_client(self, endpoints: LearnerEndpoints) -> WeightsClient:
        """The sockets this policy's weights arrive on from a learner at `endpoints`."""
        return WeightsClient(
            self.ctx,
            self.policy_id,
            endpoints.weights,
            endpoints.snapshot,
            self.requester,
            self.config.actors.weights_refresh_s,
            learner_socket_options(self.config, endpoints),
        )

    def close(self) -> None:
        self.weights.close()


def check_finite(tensors: dict) -> None:
    """ValueError naming the first floating tensor with a NaN or infinity (a diverged learner's weights)."""
    for name, array in tensors.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ValueError(f"tensor {name!r} holds NaN or infinite values")


class PolicyLink:
    """An actor's link to one policy's learner: the followed network, a PUSH socket and a bounded backlog.

    Links never wait on each other: a policy whose learner is slow or gone keeps acting with the last
    version it got, and its batches queue in its own backlog (oldest dropped and counted)."""

    def __init__(
        self,
        ctx: Any,
        config: RunConfig,
        policy: str,
        spaces: PolicySpaces,
        endpoints: LearnerEndpoints,
        name: str,
        seed: int,
    ):
        self.policy_id = policy
        self.spaces = spaces
        self.followed = FollowedPolicy(ctx, config, policy, spaces, endpoints, name, seed)
        self.push_socket = sockets.transitions_push(
            ctx, endpoints.transitions, learner_socket_options(config, endpoints)
        )
        self.frame_stack = config.env.frames_per_obs(spaces.observation_space.shape or ())
        self.sent_whole = 0  # stacked batches that could not be cut to frames (stacks not FrameStackObservation's)
        # A Dict observation's image keys that may be frame stacks: each batch is checked against the rule
        # (PROTOCOL.md 2.1.5), and a key whose arrays once do not follow it travels whole from then on.
        self.key_stacks = stack_candidates(spaces.observation_space, MAX_OBS_STACK)
        # Off-policy learners cut received unrolls into n-step windows, so joined unrolls train the same; an
        # on-policy learner would see longer unrolls (other V-trace traces and batches): it gets them as made.
        # Frame-stacked unrolls join as their frames (PROTOCOL.md 2.1.2): the message keeps the first one's history.
        on_policy = algorithm_of(policy_config(config, policy)).on_policy
        joins = 1 if on_policy else config.actors.join_unrolls
        self.backlog = JoiningBacklog(config.actors.backlog_batches, joins)

    @property
    def version(self) -> int:
        return self.followed.version

    @property
    def net(self) -> Any:
        return self.followed.net

    def poll_weights(self) -> bool:
        return self.followed.poll()

    def reconnect(self, ctx: Any, config: RunConfig, endpoints: LearnerEndpoints) -> None:
        """The learner moved: new sockets to its new addresses; the backlog waits and goes to the new one."""
        self.followed.reconnect(endpoints)
        old = self.push_socket
        self.push_socket = sockets.transitions_push(
            ctx, endpoints.transitions, learner_socket_options(config, endpoints)
        )
        sockets.close(old, linger_ms=0)  # what it still held went to a learner that is gone

    def weight_sockets(self) -> list:
        """The sockets a new weight version arrives on (to wait on; only poll_weights reads them)."""
        return [self.followed.weights.sub, self.followed.weights.snapshot]

    def push(self, batch: TransitionBatch) -> None:
        # encoded when sent: joined with the unrolls after it if they wait together
        self.backlog.push(self.wire_form(batch))

    def wire_form(self, batch: TransitionBatch) -> TransitionBatch:
        """Frame stacks travel as their newest frames (PROTOCOL.md 2.1.2); a batch that cannot goes whole."""
        if batch.keyed:
            return self.keyed_wire_form(batch)
        if self.frame_stack < 2 or batch.obs_stack == self.frame_stack:
            return batch  # nothing to cut, or the actor's stepping kept frames already
        packed = stacks.pack(batch, self.frame_stack)
        if packed is None:
            self.sent_whole += 1
            if self.sent_whole == 1:
                log.warning(
                    "observations are not FrameStackObservation's stacks of %d frames: sending them whole",
                    self.frame_stack,
                )
            return batch
        return packed

    def keyed_wire_form(self, batch: TransitionBatch) -> TransitionBatch:
        """A Dict observation's stacked image keys as their newest frames (PROTOCOL.md 2.1.5), the rest whole."""
        if not self.key_stacks:
            return batch
        packed, whole = stacks.pack_keys(batch, self.key_stacks)
        for key in whole:
            log.info(
                "observation key %r travels whole: its arrays are not stacks of %d frames as FrameStackObservation "
                "makes them",
                key,
                self.key_stacks.pop(key),
            )
        return packed

    def flush(self) -> None:
        """Send what the socket takes now, oldest first; never blocks."""
        self.backlog.flush(
            lambda frames: bool(sockets.send_frames(self.push_socket, frames)),
            lambda: sockets.writable(self.push_socket),
        )

    def close(self) -> None:
        self.followed.close()
        sockets.close(self.push_socket, linger_ms=0)
