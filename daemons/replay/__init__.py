"""Replay for off-policy learners: n-step accumulation, a ring buffer, and the sum-tree behind prioritized sampling.

Pure numpy: nothing here imports torch.
"""

from daemons.replay.batch import SampledBatch
from daemons.replay.buffer import ReplayBuffer
from daemons.replay.frames import FrameReplay
from daemons.replay.nstep import NStepAccumulator, NStepTransitions
from daemons.replay.sumtree import SumTree

__all__ = ["FrameReplay", "NStepAccumulator", "NStepTransitions", "ReplayBuffer", "SampledBatch", "SumTree"]
