"""Which supervisor a control command asks: the endpoint file of a run directory (or of the newest run here), and
whether that run's supervisor is still there to answer."""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

import click

from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.runtime.run_lock import gone_holder


def endpoint_files() -> list[str]:
    """The endpoint files of the runs here (runs/*/endpoint), newest first; one removed while we look is skipped."""
    found = []
    for path in glob.glob("runs/*/endpoint"):
        try:
            found.append((os.path.getmtime(path), path))
        except OSError:  # its run ended between the glob and the stat
            continue
    return [path for _, path in sorted(found, reverse=True)]


def find_endpoint(endpoint: str | None, run_dir: str | None) -> str:
    """--endpoint, else RUN_DIR/endpoint, else $TANDEM_ENDPOINT, else the newest runs/*/endpoint here whose
    supervisor is alive. An endpoint file whose supervisor is gone (killed without cleaning up) is no answer:
    waiting for it to answer would only time out, so that is said at once."""
    if endpoint:
        return endpoint
    if not run_dir and os.environ.get("TANDEM_ENDPOINT"):
        return os.environ["TANDEM_ENDPOINT"]
    stale: list[tuple[str, str]] = []
    for path in [os.path.join(run_dir, "endpoint")] if run_dir else endpoint_files():
        try:
            address = Path(path).read_text().strip()
        except OSError:
            continue
        holder = gone_holder(Path(path).parent)
        if holder is None:
            return address
        stale.append((path, holder))
    if stale:
        path, holder = stale[0]
        click.echo(
            f"error: the run in {Path(path).parent} is not running: its supervisor (pid {holder}) has ended "
            f"without cleaning up, and {path} is left from it. `tandem up` starts it again (and resumes it).",
            err=True,
        )
        sys.exit(int(ExitCode.UNREACHABLE))
    where = f"{run_dir}/endpoint" if run_dir else "runs/*/endpoint"
    click.echo(
        f"error: no supervisor endpoint found ({where} does not exist). Is `tandem up` running in this "
        "directory? Pass --endpoint tcp://HOST:PORT or --run-dir DIR.",
        err=True,
    )
    sys.exit(int(ExitCode.UNREACHABLE))
