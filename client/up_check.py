"""`tandem up`'s config check: `config check`'s probe, in a child of the daemons' fork server (torch loaded there
already), so that the supervisor process itself never imports torch."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

from tandem.client.preflight import ProbeFailed, ProbeReport, findings, one_line, probe
from tandem.daemons.config import RunConfig, load_config
from tandem.daemons.settings.file_order import FileOrder

# Beyond the env's build deadline, for each policy's network and a loaded machine: this check looks for mistakes;
# an env slower than its deadline is the supervisor's to handle, as it would be without the check.
NETWORKS_S = 30.0


class Refused(Exception):
    """The config has mistakes `tandem up` will not start with: one line each, in the order of the file."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


def preflight(config_file: str, overrides: tuple[str, ...], config: RunConfig, order: FileOrder) -> None:
    """What `config check` would say of a config that loaded without a mistake; Refused with its lines."""
    found = findings(config, [], order, lambda c: probe_in_child(config_file, overrides, c))
    if found.problems:
        raise Refused(found.problems)


def probe_in_child(config_file: str, overrides: tuple[str, ...], config: RunConfig) -> ProbeReport:
    """`probe` in a process forked from the fork server, waited for at most the time a daemon gets to import
    and to build its env; ProbeFailed as `probe`."""
    from tandem.daemons.supervisor.children import forkserver_context

    context = forkserver_context()
    answers, answer = context.Pipe(duplex=False)
    child = context.Process(
        target=probe_child,
        args=(str(Path(config_file).resolve()), tuple(overrides), answer),
        name="config-probe",
        daemon=True,
    )
    child.start()
    answer.close()  # ours: the child holds its own end, and its death shows here as the end of the pipe
    limit_s = config.supervisor.first_heartbeat_s + config.supervisor.build_env_deadline_s + NETWORKS_S
    try:
        if not answers.poll(limit_s):
            raise ProbeFailed(
                [
                    f"checking the env and networks took more than {limit_s:g} s (supervisor.first_heartbeat_s + "
                    f"build_env_deadline_s + {NETWORKS_S:g} s): `tandem config check` shows where it stops"
                ]
            )
        kind, lines, skipped = answers.recv()
    except EOFError:
        child.join(5.0)
        raise ProbeFailed([f"the process checking the env ended without a word (exit code {child.exitcode})"]) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join(5.0)
        answers.close()
    if kind != "ok":
        raise ProbeFailed(lines)
    return ProbeReport(lines, skipped)


def probe_child(config_file: str, overrides: tuple[str, ...], answer: Any) -> None:
    """In the child: load the config and probe it; send ('ok', lines, skipped) or ('failed', lines, [])."""
    logging.disable(logging.WARNING)  # what loading the file warns about, the parent has said already
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole terminal group: the parent ends us
    try:
        config = load_config(config_file, overrides)
        report = probe(config, config_file, config.supervisor.build_env_deadline_s, NETWORKS_S)
        answer.send(("ok", report.lines, report.skipped))
    except ProbeFailed as exc:
        answer.send(("failed", exc.lines, []))
    except Exception as exc:  # noqa: BLE001 - sent as one line: the parent prints it
        answer.send(("failed", [one_line(exc)], []))
    finally:
        answer.close()
