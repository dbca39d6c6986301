"""`WeightBlob` (a versioned, checksummed set of tensors) and `WeightRequest` (ask for the latest one)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tandem.protocol import framing
from tandem.protocol.errors import ProtocolError
from tandem.protocol.limits import DEFAULT_LIMITS, Limits

BLOB_FIELDS = {
    "policy_id": framing.string,
    "version": framing.count,
    "train_step": framing.count,
    "checksum": framing.count,
}
MAX_PACE_PER_S = 1e12  # transitions/s; far above any real learner, so a larger value is a broken peer
MAX_PACE_STREAMS = 1 << 20
MAX_PACE_CREDIT = 1 << 40  # transitions per version
MAX_ENV_STEPS = 1 << 62  # env steps behind one version: beyond any run, so a larger value is a broken peer
MAX_POOL = 4096  # pooled versions one blob may list (PROTOCOL.md 2.2): far above any configured pool
REQUEST_FIELDS = {
    "policy_id": framing.string,
    "have_version": framing.version_or_none,
    "requester": framing.string,
}


def pace_fields(header: Mapping[str, Any]) -> dict[str, Any]:
    """The optional insert budget (`pace_per_s`, `pace_streams`, `pace_credit`); absent means no limit (0)."""
    per_s = header.get("pace_per_s", 0.0)
    if type(per_s) not in (int, float) or not 0.0 <= per_s <= MAX_PACE_PER_S:  # NaN fails the comparison too
        raise ProtocolError(f"must be a number in [0, {MAX_PACE_PER_S:g}], got {per_s!r}", "pace_per_s")
    streams = header.get("pace_streams", 0)
    if type(streams) is not int or not 0 <= streams <= MAX_PACE_STREAMS:
        raise ProtocolError(f"must be an integer in [0, {MAX_PACE_STREAMS}], got {streams!r}", "pace_streams")
    credit = header.get("pace_credit", 0)
    if type(credit) is not int or not 0 <= credit <= MAX_PACE_CREDIT:
        raise ProtocolError(f"must be an integer in [0, {MAX_PACE_CREDIT}], got {credit!r}", "pace_credit")
    return {"pace_per_s": float(per_s), "pace_streams": streams, "pace_credit": credit}


def env_steps_field(header: Mapping[str, Any]) -> int:
    """The optional `env_steps` (env steps of the transitions the learner had taken in); absent means unknown (0)."""
    steps = header.get("env_steps", 0)
    if type(steps) is not int or not 0 <= steps <= MAX_ENV_STEPS:
        raise ProtocolError(f"must be an integer in [0, 2**62], got {steps!r}", "env_steps")
    return steps


def pool_field(header: Mapping[str, Any]) -> tuple[int, ...]:
    """The optional `pool`: the versions the learner keeps for opponents, strictly rising; absent means none."""
    pool = header.get("pool", [])
    if not isinstance(pool, list) or len(pool) > MAX_POOL:
        raise ProtocolError(f"must be a list of at most {MAX_POOL} versions", "pool")
    for i, version in enumerate(pool):
        if type(version) is not int or version < 0 or (i and version <= pool[i - 1]):
            raise ProtocolError(f"must be strictly rising versions >= 0, got {version!r} at {i}", "pool")
    return tuple(pool)


def wanted_version_field(header: Mapping[str, Any]) -> int:
    """The optional `version` of a weight_request: one pooled version wanted; absent (-1) means the latest."""
    if "version" not in header:
        return -1
    return framing.count("version", header["version"])


def tensor_checksum(tensors: Mapping[str, np.ndarray]) -> int:
    """CRC-32 (zlib/IEEE) over every tensor's raw little-endian bytes, in order, chained."""
    crc = 0
    for name, arr in tensors.items():
        crc = zlib.crc32(framing.array_frame(framing.wire_array(name, arr)), crc)
    return crc


@dataclass(frozen=True, eq=False)
class WeightBlob:
    """Weights of one policy at one version; `checksum` covers the tensor bytes in order.

    `pace_per_s` is the learner's insert budget (transitions/s for all its actors together, 0 = no
    limit) and `pace_streams` the number of actors it heard from recently; actors may pace to their share.
    `pace_credit` is what all its actors together may send against each version (transitions, 0 = none).
    `env_steps` is how many env steps the transitions the learner had taken in when it made these weights
    stand for (0 = unknown): what an evaluation of this version cost in samples. `pool` lists the versions
    the learner keeps for opponents (self-play), each of which a `WeightRequest` with `version` gets.
    """

    policy_id: str
    version: int
    train_step: int
    tensors: Mapping[str, np.ndarray]
    checksum: int
    pace_per_s: float = 0.0
    pace_streams: int = 0
    pace_credit: int = 0
    env_steps: int = 0
    pool: tuple[int, ...] = ()

    KIND = "weight_blob"

    @classmethod
    def build(
        cls,
        policy_id: str,
        version: int,
        train_step: int,
        tensors: Mapping[str, Any],
        pace_per_s: float = 0.0,
        pace_streams: int = 0,
        pace_credit: int = 0,
        env_steps: int = 0,
        pool: Sequence[int] = (),
    ) -> WeightBlob:
        """Make a blob from named arrays, converting each to wire form and computing the checksum."""
        wired = {name: framing.wire_array(name, arr) for name, arr in tensors.items()}
        return cls(
            policy_id,
            version,
            train_step,
            wired,
            tensor_checksum(wired),
            pace_per_s,
            pace_streams,
            pace_credit,
            env_steps,
            tuple(pool),
        )

    @property
    def nbytes(self) -> int:
        return sum(int(arr.nbytes) for arr in self.tensors.values())

    def verify_checksum(self) -> None:
        """Raise ProtocolError if the tensors do not match the checksum the sender computed."""
        actual = tensor_checksum(self.tensors)
        if actual != self.checksum:
            raise ProtocolError(f"tensor bytes give {actual:#010x}, header says {self.checksum:#010x}", "checksum")

    def to_frames(self) -> list[framing.Frame]:
        fields = {name: getattr(self, name) for name in BLOB_FIELDS}
        for name, check in BLOB_FIELDS.items():
            check(name, fields[name])
        if self.pace_per_s or self.pace_credit:  # sent only when there is a limit: a blob without it means none
            fields.update(
                pace_fields(
                    {"pace_per_s": self.pace_per_s, "pace_streams": self.pace_streams, "pace_credit": self.pace_credit}
                )
            )
        if self.env_steps:
            fields["env_steps"] = env_steps_field({"env_steps": self.env_steps})
        if self.pool:  # sent only by a learner that keeps opponents: other blobs are as before
            fields["pool"] = list(pool_field({"pool": list(self.pool)}))
        return framing.encode(self.KIND, fields, list(self.tensors.items()))

    @classmethod
    def from_frames(cls, frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> WeightBlob:
        header, views = framing.decode_header(frames, limits)
        framing.expect_kind(header, cls.KIND)
        fields = framing.take_fields(header, BLOB_FIELDS)
        if fields["checksum"] > 0xFFFFFFFF:
            raise ProtocolError("must be a 32-bit CRC", "checksum")
        return cls(
            **fields,
            tensors=framing.take_arrays(header, views, limits),
            **pace_fields(header),
            env_steps=env_steps_field(header),
            pool=pool_field(header),
        )


@dataclass(frozen=True)
class WeightRequest:
    """Sent to a learner's snapshot socket: "send me your latest weights if newer than `have_version`", or, with
    `version` >= 0, "send me that version from your opponent pool" (PROTOCOL.md 2.3)."""

    policy_id: str
    have_version: int = -1
    requester: str = ""
    version: int = -1

    KIND = "weight_request"

    def to_frames(self) -> list[framing.Frame]:
        fields = {name: getattr(self, name) for name in REQUEST_FIELDS}
        for name, check in REQUEST_FIELDS.items():
            check(name, fields[name])
        if self.version >= 0:  # a request for the latest weights is as before
            fields["version"] = framing.count("version", self.version)
        return framing.encode(self.KIND, fields)

    @classmethod
    def from_frames(cls, frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> WeightRequest:
        header, views = framing.decode_header(frames, limits)
        framing.expect_kind(header, cls.KIND)
        if len(views) != 1:
            raise ProtocolError(f"a {cls.KIND} has exactly one frame, got {len(views)}", "frames")
        return cls(**framing.take_fields(header, REQUEST_FIELDS), version=wanted_version_field(header))
