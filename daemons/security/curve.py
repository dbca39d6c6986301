"""A daemon's CurveZMQ: its keys from [security], the ZAP authenticator of the sockets it binds, and reloads."""

from __future__ import annotations

import functools
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from tandem.daemons.security.keystore import ALLOWED, KeySetupError, load_keypair, parse_key
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol.sockets import ZAP_DOMAIN, CurveKeys

log = logging.getLogger(__name__)


def curve_keys(config: RunConfig) -> CurveKeys | None:
    """This host's keys, with the supervisor's public key as the server key; None when no key_dir is set."""
    s = config.security
    return _load(s.key_dir, s.key_name, s.supervisor_key, s.curve_on_loopback)


@functools.lru_cache(maxsize=8)  # read once per process: every socket a daemon makes asks
def _load(key_dir: str, key_name: str, supervisor_key: str, on_loopback: bool) -> CurveKeys | None:
    if not key_dir:
        return None
    directory = Path(key_dir).expanduser()
    public, secret = load_keypair(directory, key_name)
    server = parse_key(supervisor_key, directory) if supervisor_key else public
    return CurveKeys(public, secret, server, on_loopback)


def cli_curve_keys(run_config: RunConfig | None) -> CurveKeys | None:
    """Keys of a CLI command (`tandem status`, `stop`, ...): $TANDEM_KEY_DIR ($TANDEM_KEY_NAME, default host;
    $TANDEM_SUPERVISOR_KEY; $TANDEM_CURVE_ON_LOOPBACK=1), else the [security] of the run's config (the CLI loads
    it from the run directory's config.toml)."""
    import os

    key_dir = os.environ.get("TANDEM_KEY_DIR", "")
    if key_dir:
        return _load(
            key_dir,
            os.environ.get("TANDEM_KEY_NAME", "host"),
            os.environ.get("TANDEM_SUPERVISOR_KEY", ""),
            os.environ.get("TANDEM_CURVE_ON_LOOPBACK", "") == "1",
        )
    return curve_keys(run_config) if run_config is not None else None


def check_keys(config: RunConfig) -> None:
    """KeySetupError now, at start, rather than at the first socket: a key that cannot be used is a usage error."""
    curve_keys(config)
    if config.security.key_dir and not (Path(config.security.key_dir).expanduser() / ALLOWED).is_dir():
        raise KeySetupError(
            f"{config.security.key_dir} has no {ALLOWED}/ directory: nobody could connect; "
            "`tandem keys allow KEY --name NAME` adds a client's public key"
        )


class Gatekeeper:
    """The ZAP handler of one process's CURVE server sockets: lets in the public keys of `key_dir/allowed`.

    Sockets that bind with CURVE require it (ZAP_ENFORCE_DOMAIN): while it is not running, nothing connects.
    SIGHUP (or `reload()`) reads the allow-list again, so a revoked key is refused from its next connection
    on, without a restart; connections already made stay up until they drop.
    """

    def __init__(self, ctx: Any, key_dir: str):
        from zmq.auth.thread import ThreadAuthenticator

        self.allowed_dir = str(Path(key_dir).expanduser() / ALLOWED)
        self.auth = ThreadAuthenticator(ctx, log=logging.getLogger("tandem.daemons.security.zap"))
        self.reload_asked = threading.Event()
        self.reloads = 0

    def start(self, on_sighup: bool = True) -> Gatekeeper:
        self.auth.start()
        self.auth.configure_curve(domain=ZAP_DOMAIN, location=self.allowed_dir)
        if on_sighup and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, lambda *_: self.reload_asked.set())
        return self

    def reload(self) -> None:
        self.auth.configure_curve(domain=ZAP_DOMAIN, location=self.allowed_dir)
        self.reloads += 1
        log.info("reloaded the allow-list from %s", self.allowed_dir)

    def poll(self) -> None:
        """Call from the loop that owns the sockets: a reload SIGHUP asked for happens here, not in the handler."""
        if self.reload_asked.is_set():
            self.reload_asked.clear()
            self.reload()

    def stop(self) -> None:
        self.auth.stop()


def gatekeeper_for(ctx: Any, config: RunConfig, endpoints: list[str]) -> Gatekeeper | None:
    """A started Gatekeeper when any of `endpoints` (about to be bound) uses CURVE, else None."""
    from tandem.protocol.sockets import uses_curve

    keys = curve_keys(config)
    if keys is None or not any(uses_curve(e, keys) for e in endpoints):
        return None
    return Gatekeeper(ctx, config.security.key_dir).start()
