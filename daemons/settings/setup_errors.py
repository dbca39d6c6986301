"""SetupError: a mistake in the run's setup that fails the same way at every start, so restarting cannot help."""

from __future__ import annotations


class SetupError(ValueError):
    """An env id gymnasium does not know, a plug-in that does not import, an algorithm that cannot act in
    the env's action space, a network that cannot read its observations, a device this machine lacks.

    A daemon that meets one exits with ExitCode.SETUP and the supervisor makes it FATAL at once with this
    one line, instead of retrying through its backoff ladder; `tandem config check` finds the same ones.
    """
