"""Fixtures shared by every test package: loopback endpoints and a ZeroMQ context that is always closed."""

from __future__ import annotations

import os
import tempfile

import pytest

from tandem.protocol import sockets


@pytest.fixture
def zmq_ctx():
    ctx = sockets.new_context()
    yield ctx
    sockets.close_context(ctx, linger_ms=0)


@pytest.fixture
def control_pair(zmq_ctx, tmp_path):
    """(ROUTER, DEALER): a control socket's two ends, connected over ipc:// in the test's own directory."""
    endpoint = f"ipc://{tmp_path}/control"
    return sockets.control_router(zmq_ctx, endpoint), sockets.control_dealer(zmq_ctx, endpoint)


@pytest.fixture
def short_tmp():
    """A short temporary directory: ipc:// paths must stay under about 100 characters."""
    with tempfile.TemporaryDirectory(prefix="tdm-", dir="/tmp") as path:
        yield path


@pytest.fixture(params=["ipc", "tcp"])
def endpoint_factory(request, short_tmp):
    """Returns a function giving a fresh bindable endpoint: ipc in a temp dir, or tcp on 127.0.0.1 with a free port."""
    counter = iter(range(1000))

    def make() -> str:
        if request.param == "ipc":
            return f"ipc://{short_tmp}/s{next(counter)}"
        return "tcp://127.0.0.1:*"

    make.transport = request.param
    return make


# CI's guard against silent skips: with TANDEM_NO_SKIPS=1 (set by .ci/run) a skipped test fails, naming its skip
# reason, and a skipped module (importorskip at the top) fails the session and is listed at the end. Only the
# reasons below pass: tests of the no-CUDA error path, which skip on a machine with a GPU (CI has none).
ALLOWED_SKIPS = ("CUDA is available here", "this machine has CUDA")
_skipped_modules: list[str] = []


def _no_skips() -> bool:
    return os.environ.get("TANDEM_NO_SKIPS", "") not in ("", "0")


def _forbidden_skip(report) -> str | None:
    """The skip reason of `report` when TANDEM_NO_SKIPS forbids it, else None."""
    if not (_no_skips() and report.skipped) or hasattr(report, "wasxfail"):
        return None
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    return None if any(allowed in reason for allowed in ALLOWED_SKIPS) else reason


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    reason = _forbidden_skip(report)
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"skipped, but TANDEM_NO_SKIPS=1 allows no skip here: {reason}"
    return report


def pytest_collectreport(report):
    reason = _forbidden_skip(report)
    if reason is not None:
        _skipped_modules.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _skipped_modules and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _skipped_modules:
        terminalreporter.section("modules skipped, but TANDEM_NO_SKIPS=1 allows no skip", red=True)
        for line in _skipped_modules:
            terminalreporter.write_line(line)
