"""The name `ps`, `top` and `pgrep` show for a daemon: the whole `tandem-learner-speaker`, not 15 characters of it."""

from __future__ import annotations

import setproctitle


def set_process_name(name: str) -> None:
    """Set the command line `ps` shows and, where the kernel allows, the thread name (`ps -o comm`)."""
    setproctitle.setproctitle(name)
    # setthreadtitle goes to prctl(PR_SET_NAME), which keeps 15 bytes: comm shows the start, args the whole.
    setproctitle.setthreadtitle(name)
