"""What makes one process repeat itself for a seed: seeded global RNGs, deterministic kernels, one torch thread."""

from __future__ import annotations

import os
import random


def make_deterministic(seed: int) -> None:
    """Seed Python's, numpy's and torch's global RNGs, ask torch for deterministic kernels and one thread.

    The algorithms seed their own generators from run.seed; this covers whatever else draws from a global one."""
    import numpy as np
    import torch

    from tandem.daemons.runtime.torch_threads import set_torch_threads

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS is deterministic only with it
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    set_torch_threads(1)
