"""Replay for off-policy learners: n-step accumulation, a ring buffer, and the sum-tree behind prioritized sampling.

Pure numpy: nothing here imports torch.
"""

from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.replay.buffer import ReplayBuffer
from tandem.daemons.replay.frames import FrameReplay
from tandem.daemons.replay.nstep import NStepAccumulator, NStepTransitions
from tandem.daemons.replay.sumtree import SumTree

__all__ = ["FrameReplay", "NStepAccumulator", "NStepTransitions", "ReplayBuffer", "SampledBatch", "SumTree"]
