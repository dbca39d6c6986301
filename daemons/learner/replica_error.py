"""The error of a data-parallel replica group that cannot go on (kept apart from torch, so any daemon can name it)."""


class ReplicaError(RuntimeError):
    """A collective of the replica group failed or timed out, or a generation could not form: the replicas left
    re-form their group without the lost one; where no generation forms in time, the learner exits and is
    restarted."""
