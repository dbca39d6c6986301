"""An actor's followed policy takes only weights that fit its network and are finite; it never dies of a bad blob."""

from __future__ import annotations

import time

import numpy as np

from tandem.daemons.acting.link import FollowedPolicy
from tandem.daemons.algorithms import make_algorithm
from tandem.daemons.config import load_config
from tandem.daemons.envs.probe import probe_policy_spaces
from tandem.daemons.runtime.endpoints import LearnerEndpoints
from tandem.protocol import WeightBlob, sockets
from tests.system.harness import ROOT

WAIT_S = 10.0


def test_blobs_that_do_not_fit_or_hold_nan_are_counted_and_the_current_weights_stay(zmq_ctx, short_tmp):
    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{short_tmp}'"])
    spaces = probe_policy_spaces(config)
    good = make_algorithm(
        config, spaces.observation_space, spaces.action_space, "cpu", mask_size=spaces.mask_size
    ).weights()
    first = next(iter(good))
    wrong_shape = {**good, first: np.zeros((3, 3), np.float32)}
    with_nan = {name: np.full_like(array, np.nan) if array.dtype.kind == "f" else array for name, array in good.items()}

    endpoints = LearnerEndpoints(f"ipc://{short_tmp}/t", f"ipc://{short_tmp}/w", f"ipc://{short_tmp}/s")
    pub = sockets.weights_pub(zmq_ctx, endpoints.weights)
    router = sockets.snapshot_router(zmq_ctx, endpoints.snapshot)
    followed = FollowedPolicy(zmq_ctx, config, "default", spaces, endpoints, "actor-0", seed=0)
    try:
        # The followed policy asks the snapshot socket at once; each answer goes to the asker's identity.
        deadline = time.monotonic() + WAIT_S
        request = None
        while request is None and time.monotonic() < deadline:
            followed.poll()
            request = sockets.recv_frames(router, 50)
        assert request is not None, "the followed policy never asked for weights"
        identity = bytes(request[0])

        def answer(version: int, tensors: dict) -> bool:
            blob = WeightBlob.build("default", version, version, tensors)
            assert sockets.send_message(router, blob, identity=identity, timeout_ms=1000)
            end = time.monotonic() + WAIT_S
            while time.monotonic() < end:
                if followed.poll():
                    return True
                if followed.weights.counters["blobs_rejected"] >= version:
                    return False
                time.sleep(0.01)
            raise AssertionError(f"version {version} was neither taken nor rejected within {WAIT_S} s")

        assert not answer(1, wrong_shape)
        assert not answer(2, with_nan)
        assert followed.version == -1 and followed.weights.counters["blobs_rejected"] == 2
        assert answer(3, good)
        assert followed.version == 3 and followed.weights.counters["blobs_rejected"] == 2
    finally:
        followed.close()
        sockets.close(pub, linger_ms=0)
        sockets.close(router, linger_ms=0)
