"""Why a daemon exited, as status and the supervisor's log say it: from the incarnation that exited (its pid, the
part of the log it wrote), never an earlier one, and never cut inside a word."""

from __future__ import annotations

import logging
from pathlib import Path

from tandem.daemons.main import DaemonSpec
from tandem.daemons.supervisor import states
from tandem.daemons.supervisor.children import Child
from tandem.daemons.supervisor.exit_reason import ERROR_LINE_CHARS, clip_words, last_error_line
from tests.daemons.supervisor.builders import as_started, supervisor

GLOO = (
    "2026-11-28 22:41:07,512 learner-default ERROR tandem.daemons.main: RuntimeError: "
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [127.0.0.1]:41234: Connection reset by peer"
)


def test_the_exit_line_of_a_recycled_process_says_why_it_was_recycled(tmp_path, caplog):
    """Not an earlier incarnation's error (the exit line printed the stale last error of a recycled replica)."""
    sup = as_started(supervisor(tmp_path))
    rec = sup.processes["actor-0"].record
    rec.last_error = "killed by SIGKILL"  # an earlier incarnation's
    states.recycle(rec, "rss 300 MiB over its limit of 100 MiB", 1.0)  # what the memory check does
    assert rec.last_error == rec.last_recycle == "rss 300 MiB over its limit of 100 MiB"
    sup.processes["actor-0"].child = ExitedChild(tmp_path, 0)
    sup.stopping = True  # no start of the next incarnation: nothing is spawned here
    with caplog.at_level(logging.INFO, logger="tandem.daemons.supervisor.supervisor"):
        sup.step(1.5)
    said = [r.getMessage() for r in caplog.records if "exited" in r.getMessage()]
    assert said == ["actor-0 (pid 100) exited with code 0 -> BACKOFF: rss 300 MiB over its limit of 100 MiB"]
    assert rec.last_error == "rss 300 MiB over its limit of 100 MiB"


class ExitedChild(Child):
    """A child that has already exited with `code` (nothing is spawned), its log in `tmp_path`."""

    def __init__(self, tmp_path: Path, code: int):
        super().__init__("actor-0", DaemonSpec("actor", "x"), tmp_path / "actor-0.log")
        self.code = code

    @property
    def pid(self) -> int:
        return 100

    def poll(self) -> int:
        return self.code

    def signal(self, sig: int) -> None:
        pass


def incarnations(tmp_path: Path, earlier: list[str], this: list[str]) -> Child:
    """A log with an earlier incarnation's lines, then a new start and what it wrote."""
    child = Child("learner-default", DaemonSpec("learner", "x"), tmp_path / "logs" / "learner-default.log")
    child.log_path.parent.mkdir(parents=True)
    child.log_path.write_text("".join(line + "\n" for line in earlier))
    child.mark_log_start()
    with child.log_path.open("a") as log:
        log.writelines(line + "\n" for line in this)
    return child


def test_an_exit_reason_comes_from_the_incarnation_that_exited(tmp_path):
    """The earlier incarnation's Gloo error is not the reason the next one exited."""
    child = incarnations(tmp_path, [GLOO, "stage running -> stopping"], ["stage start -> build", "stage -> running"])
    assert last_error_line(child, 1) == "exited with code 1"
    assert last_error_line(child, -11) == "killed by SIGSEGV"
    assert "Connection reset" not in child.log_tail(20)


def test_a_sigkill_is_a_sigkill_whatever_the_log_says(tmp_path):
    child = incarnations(tmp_path, [], ["ERROR: a warning that mentions an error", "stage -> running"])
    assert last_error_line(child, -9) == "killed by SIGKILL"


def test_a_long_error_line_is_cut_between_words_keeping_its_end(tmp_path):
    child = incarnations(tmp_path, [], [GLOO + " " + "x" * 10 + " while " * 40 + "the end of it"])
    said = last_error_line(child, 1)
    assert len(said) <= ERROR_LINE_CHARS and said.startswith("...while ") and said.endswith("the end of it")
    assert clip_words(GLOO, 40) == "...Connection reset by peer"
    assert clip_words("short", 40) == "short"
