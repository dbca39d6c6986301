"""A whole run with CurveZMQ on every TCP link (forced on loopback): it trains, `tandem status` reaches it with
the run's keys, and control requests from clients off the allow-list do nothing."""

from __future__ import annotations

import os
import subprocess
import sys

from tandem.client.harness import up_command
from tandem.daemons.runtime.control_channel import ControlChannel
from tandem.daemons.runtime.exit_codes import ExitCode
from tandem.daemons.security import keystore
from tandem.protocol import ControlRequest, sockets
from tandem.protocol.sockets import CurveKeys, SocketOptions
from tests.system.harness import ROOT
from tests.system.test_supervisor import Run, rows

REFUSED_S = 2.0


def test_a_curve_run_trains_and_ignores_clients_off_the_allow_list(tmp_path):
    keys, rogue = tmp_path / "keys", tmp_path / "rogue"
    keystore.create(keys, "host")
    keystore.create(rogue, "rogue")
    run = Run(tmp_path, ["actors.count=1", f"security.key_dir='{keys}'", "security.curve_on_loopback=true"])
    contexts = []
    try:
        # The harness's own control link needs the host's keys like any client.
        run.channel.close()
        host = keystore.load_keypair(keys, "host")
        run.channel = ControlChannel(run.ctx, run.endpoint, SocketOptions(curve=CurveKeys(*host, host[0], True)))
        data = run.wait(
            lambda d: (d["policies"][0]["updates"] or 0) > 5 and rows(d)["actor-0"]["state"] == "RUNNING",
            120,
            "training over CURVE links",
        )
        assert data["policies"][0]["link"] == "curve" and data["control_link"] == "curve", data["policies"]
        pids = {r["name"]: r["pid"] for r in data["processes"]}
        # Off the allow-list (a rogue keypair), without CURVE at all: stop and restart must do nothing.
        server_key = keystore.public_key(keys, "host")
        for curve in (CurveKeys(*keystore.load_keypair(rogue, "rogue"), server_key, True), None):
            ctx = sockets.new_context()
            contexts.append(ctx)
            dealer = sockets.control_dealer(ctx, run.endpoint, SocketOptions(curve=curve))
            for n, (command, args) in enumerate((("stop", {"by": "rogue"}), ("restart", {"name": "learner-default"}))):
                sockets.send_message(dealer, ControlRequest(n + 1, command, args), timeout_ms=0)
            assert sockets.recv_frames(dealer, int(REFUSED_S * 1000)) is None, "a rogue client got an answer"
        data = run.wait(lambda d: not d["stopping"], 10, "the run still going")
        assert {r["name"]: r["pid"] for r in data["processes"]} == pids  # nothing restarted
        # The CLI finds the run's keys in its config (runs/NAME/config.toml beside the endpoint file).
        status = subprocess.run(
            [sys.executable, "-m", "tandem", "status", "--run-dir", str(tmp_path / "run"), "--json", "--timeout", "20"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert status.returncode == 0, status.stderr
        # A CLI holding a key the run does not allow is told so, not only that nobody answered.
        refused = subprocess.run(
            [sys.executable, "-m", "tandem", "status", "--endpoint", run.endpoint, "--timeout", str(REFUSED_S)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={
                **os.environ,
                "TANDEM_KEY_DIR": str(rogue),
                "TANDEM_KEY_NAME": "rogue",
                "TANDEM_SUPERVISOR_KEY": server_key,
                "TANDEM_CURVE_ON_LOOPBACK": "1",
            },
        )
        assert refused.returncode == ExitCode.UNREACHABLE, refused.stderr
        assert "refused this client's CurveZMQ handshake" in refused.stderr and "tandem keys allow" in refused.stderr
    finally:
        for ctx in contexts:
            sockets.close_context(ctx, 0)
        run.close()


def test_a_secret_key_readable_by_others_stops_the_run_before_it_starts(tmp_path):
    keys = tmp_path / "keys"
    keystore.create(keys, "host")
    (keys / "host.key_secret").chmod(0o644)
    result = subprocess.run(
        up_command(
            ROOT / "examples" / "cartpole.toml",
            [f"run.dir='{tmp_path}/run'", f"security.key_dir='{keys}'"],
            as_json=False,
        ),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr  # ExitCode.USAGE
    assert "readable by others" in result.stderr and "Traceback" not in result.stderr, result.stderr
