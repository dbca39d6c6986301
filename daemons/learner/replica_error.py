"""The error of a data-parallel replica group that cannot go on (kept apart from torch, so any daemon can name it)."""


class ReplicaError(RuntimeError):
    """A collective of the replica group failed or timed out, or the group could not form: the learner exits,
    and the supervisor restarts its whole group."""
