"""Fixtures shared by every test package: loopback endpoints and a ZeroMQ context that is always closed."""

from __future__ import annotations

import tempfile

import pytest

from protocol import sockets


@pytest.fixture
def zmq_ctx():
    ctx = sockets.new_context()
    yield ctx
    sockets.close_context(ctx, linger_ms=0)


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
