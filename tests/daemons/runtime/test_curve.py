"""CurveZMQ with ZAP on real sockets: who may connect to a server, and who is refused (every refusal a 0)."""

from __future__ import annotations

import pytest

from tandem.daemons.security import keystore
from tandem.daemons.security.curve import Gatekeeper
from tandem.protocol import ControlRequest, decode, sockets
from tandem.protocol.sockets import CurveKeys, SocketOptions

ARRIVE_S = 5.0  # a message from an allowed client arrives well within this
REFUSED_S = 1.0  # a refused client's message never arrives; this is only how long we look


@pytest.fixture
def keys(tmp_path):
    server_dir, client_dir, rogue_dir = tmp_path / "server", tmp_path / "client", tmp_path / "rogue"
    keystore.create(server_dir, "server")
    keystore.create(client_dir, "client")
    keystore.create(rogue_dir, "rogue")
    keystore.allow(server_dir, client_dir / "client.key", "client")
    pair = {
        name: keystore.load_keypair(d, name)
        for name, d in (("server", server_dir), ("client", client_dir), ("rogue", rogue_dir))
    }
    return server_dir, pair


class Server:
    """A CURVE control ROUTER on loopback (forced) with its own context and Gatekeeper."""

    def __init__(self, server_dir, pair):
        self.ctx = sockets.new_context()
        self.gate = Gatekeeper(self.ctx, str(server_dir)).start(on_sighup=False)
        public, secret = pair["server"]
        self.router = sockets.control_router(
            self.ctx, "tcp://127.0.0.1:*", SocketOptions(curve=CurveKeys(public, secret, b"", on_loopback=True))
        )
        self.endpoint = sockets.bound_endpoint(self.router)

    def heard(self, wait_s: float) -> bool:
        frames = sockets.recv_frames(self.router, int(wait_s * 1000))
        if frames is None:
            return False
        assert isinstance(decode(frames[1:]), ControlRequest)
        return True

    def close(self) -> None:
        self.gate.stop()
        sockets.close_context(self.ctx, 0)


def send_from(endpoint: str, curve: CurveKeys | None) -> sockets.zmq.Context:
    ctx = sockets.new_context()
    dealer = sockets.control_dealer(ctx, endpoint, SocketOptions(curve=curve))
    sockets.send_message(dealer, ControlRequest(1, "status", {}), timeout_ms=0)
    return ctx


def test_only_allow_listed_clients_that_know_the_server_get_through(keys):
    server_dir, pair = keys
    server = Server(server_dir, pair)
    server_key = pair["server"][0]
    contexts = []
    try:
        contexts.append(send_from(server.endpoint, CurveKeys(*pair["client"], server_key, True)))
        assert server.heard(ARRIVE_S), "the allow-listed client was refused"
        rogue_attempts = {
            "a rogue keypair": CurveKeys(*pair["rogue"], server_key, True),
            "no CURVE (NULL)": None,
            "the wrong server key": CurveKeys(*pair["client"], pair["rogue"][0], True),
        }
        accepted = 0
        for _what, curve in rogue_attempts.items():
            contexts.append(send_from(server.endpoint, curve))
            accepted += server.heard(REFUSED_S)
        assert accepted == 0, f"{accepted} rogue connections got through"
    finally:
        for ctx in contexts:
            sockets.close_context(ctx, 0)
        server.close()


def test_nothing_connects_while_the_authenticator_is_stopped(keys):
    server_dir, pair = keys
    server = Server(server_dir, pair)
    server.gate.stop()  # ZAP_ENFORCE_DOMAIN: no handler means no connection, not "anyone"
    ctx = send_from(server.endpoint, CurveKeys(*pair["client"], pair["server"][0], True))
    try:
        assert not server.heard(REFUSED_S)
    finally:
        sockets.close_context(ctx, 0)
        sockets.close_context(server.ctx, 0)


def test_a_revoked_key_is_refused_after_a_reload(keys):
    server_dir, pair = keys
    server = Server(server_dir, pair)
    curve = CurveKeys(*pair["client"], pair["server"][0], True)
    contexts = []
    try:
        contexts.append(send_from(server.endpoint, curve))
        assert server.heard(ARRIVE_S)
        keystore.revoke(server_dir, "client")
        server.gate.reload()
        contexts.append(send_from(server.endpoint, curve))  # a new connection: judged by the new list
        assert not server.heard(REFUSED_S)
    finally:
        for ctx in contexts:
            sockets.close_context(ctx, 0)
        server.close()


def test_a_client_without_the_servers_key_is_told_so(tmp_path, keys):
    _, pair = keys
    ctx = sockets.new_context()
    try:
        with pytest.raises(sockets.TransportError, match="no public key of the server"):
            sockets.control_dealer(ctx, "tcp://127.0.0.1:1", SocketOptions(curve=CurveKeys(*pair["client"], b"", True)))
    finally:
        sockets.close_context(ctx, 0)


def test_a_secret_key_readable_by_others_is_refused(tmp_path):
    keystore.create(tmp_path / "k", "host")
    (tmp_path / "k" / "host.key_secret").chmod(0o644)
    with pytest.raises(keystore.KeySetupError, match="readable by others.*chmod 600"):
        keystore.load_keypair(tmp_path / "k", "host")


def test_key_directories_are_private_and_the_allow_list_round_trips(tmp_path):
    public_file = keystore.create(tmp_path / "k", "host")
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "k" / "host.key_secret").stat().st_mode & 0o777 == 0o600
    key = keystore.public_key(tmp_path / "k", "host").decode()
    assert keystore.allowed(tmp_path / "k") == {"host": key}
    keystore.allow(tmp_path / "k", key, "again")  # a key given as text
    assert keystore.allowed(tmp_path / "k") == {"host": key, "again": key}
    with pytest.raises(keystore.KeySetupError, match="neither a public key"):
        keystore.allow(tmp_path / "k", "not-a-key", "bad")
    with pytest.raises(keystore.KeySetupError, match="exists already"):
        keystore.create(tmp_path / "k", "host")
    assert public_file.exists()
