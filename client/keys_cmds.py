"""`tandem keys`: CurveZMQ keypairs per host or role, and the allow-list of public keys that may connect."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from tandem.daemons.runtime.exit_codes import ExitCode

DEFAULT_DIR = "~/.config/tandem/keys"
dir_option = click.option(
    "--dir",
    "key_dir",
    default=lambda: os.environ.get("TANDEM_KEY_DIR", DEFAULT_DIR),
    show_default=f"$TANDEM_KEY_DIR or {DEFAULT_DIR}",
    help="The key directory (security.key_dir).",
)


def run(action) -> None:
    from tandem.daemons.security.keystore import KeySetupError

    try:
        action()
    except KeySetupError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(ExitCode.USAGE))
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {getattr(exc, 'filename', '')}", err=True)
        sys.exit(int(ExitCode.USAGE))


@click.group("keys")
def keys_group() -> None:
    """CurveZMQ keys: every link that leaves this machine is encrypted and authenticated with them.

    \b
    On each machine:   tandem keys create host
    On each server:    tandem keys allow CLIENT_PUBLIC_KEY --name that-machine
    In the run config: [security] key_dir = "~/.config/tandem/keys"
    """


@keys_group.command("create")
@click.argument("name", default="host")
@dir_option
def create_cmd(name: str, key_dir: str) -> None:
    """Make keypair NAME (secret key 0600 in a 0700 directory) and allow its own public key."""
    from tandem.daemons.security import keystore

    def action() -> None:
        path = keystore.create(Path(key_dir).expanduser(), name)
        click.echo(f"wrote {path} and its secret key; public key: {keystore.read_public(path).decode()}")

    run(action)


@keys_group.command("show")
@click.argument("name", default="host")
@dir_option
def show_cmd(name: str, key_dir: str) -> None:
    """Print the public key of keypair NAME (give it to the machines that must let this one in)."""
    from tandem.daemons.security import keystore

    run(lambda: click.echo(keystore.public_key(Path(key_dir).expanduser(), name).decode()))


@keys_group.command("allow")
@click.argument("key")
@click.option("--name", required=True, help="Name of the allowed machine or role (its file in allowed/).")
@dir_option
def allow_cmd(key: str, name: str, key_dir: str) -> None:
    """Let the holder of KEY (40 Z85 characters, or a public key file) connect; running daemons take it on SIGHUP."""
    from tandem.daemons.security import keystore

    run(lambda: click.echo(f"allowed {name}: {keystore.allow(Path(key_dir).expanduser(), key, name)}"))


@keys_group.command("revoke")
@click.argument("name")
@dir_option
def revoke_cmd(name: str, key_dir: str) -> None:
    """Remove NAME from the allow-list; send SIGHUP to running daemons so new connections are refused."""
    from tandem.daemons.security import keystore

    run(lambda: (keystore.revoke(Path(key_dir).expanduser(), name), click.echo(f"revoked {name}")))


@keys_group.command("list")
@dir_option
def list_cmd(key_dir: str) -> None:
    """The keypairs in the directory and every allowed public key."""
    from tandem.daemons.security import keystore

    def action() -> None:
        directory = Path(key_dir).expanduser()
        for secret in sorted(directory.glob("*.key_secret")):
            click.echo(f"keypair {secret.stem}: {keystore.public_key(directory, secret.stem).decode()}")
        for name, key in keystore.allowed(directory).items():
            click.echo(f"allowed {name}: {key}")

    run(action)
