"""A key directory: this host's keypairs (NAME.key, NAME.key_secret) and an allow-list of public keys (allowed/)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import zmq
import zmq.auth
import zmq.utils.z85

ALLOWED = "allowed"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
Z85_KEY = re.compile(r"^[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")
PUBLIC_CERT = """#   ZeroMQ CURVE Public Certificate (written by `tandem keys allow`)
#   Anyone holding the matching secret key may connect to this host's Tandem sockets.

metadata
curve
    public-key = "{key}"
"""


class KeySetupError(ValueError):
    """A key directory, key file or key that cannot be used; the message says which and what to do."""


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise KeySetupError(f"key name {name!r}: use letters, digits, '.', '_' or '-' (at most 64 characters)")
    return name


def create(key_dir: Path, name: str) -> Path:
    """A new keypair NAME in `key_dir` (0700; the secret 0600), its public key also allowed; the public file."""
    check_name(name)
    key_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(key_dir, 0o700)  # an existing directory too: the secret keys live here
    secret = key_dir / f"{name}.key_secret"
    if secret.exists():
        raise KeySetupError(
            f"{secret} exists already; remove it first to make a new keypair (clients that "
            "allowed the old public key will have to allow the new one)"
        )
    public_file, secret_file = zmq.auth.create_certificates(str(key_dir), name)
    os.chmod(secret_file, 0o600)
    os.chmod(public_file, 0o644)
    allow(key_dir, public_file, name)  # the host's own daemons talk to each other
    return Path(public_file)


def public_key(key_dir: Path, name: str) -> bytes:
    path = key_dir / f"{check_name(name)}.key"
    if not path.exists():
        raise KeySetupError(f"no public key {path}; make one with `tandem keys create {name} --dir {key_dir}`")
    return read_public(path)


def read_public(path: Path) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise KeySetupError(f"cannot read a public key from {path}: {exc}") from exc
    if not public or not Z85_KEY.match(public.decode("ascii", "replace")):
        raise KeySetupError(f"{path} holds no CURVE public key")
    return public


def load_keypair(key_dir: Path, name: str) -> tuple[bytes, bytes]:
    """(public, secret) of NAME; refused when other users (not owner, not group) can read the secret key file.

    Group read is allowed: Kubernetes mounts a Secret for a non-root container as root:fsGroup 0440.
    """
    path = key_dir / f"{check_name(name)}.key_secret"
    try:
        mode = os.stat(path).st_mode  # follows a symlink (Kubernetes mounts Secrets so): the file's own mode counts
    except FileNotFoundError as exc:
        raise KeySetupError(f"no secret key {path}; make one with `tandem keys create {name} --dir {key_dir}`") from exc
    except OSError as exc:
        raise KeySetupError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if mode & stat.S_IRWXO:
        raise KeySetupError(
            f"secret key {path} is readable by others (mode {stat.S_IMODE(mode):04o}); "
            f"`chmod 600 {path}` and make sure it was not copied elsewhere"
        )
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise KeySetupError(f"cannot read a keypair from {path}: {exc}") from exc
    if not secret:
        raise KeySetupError(f"{path} holds no secret key")
    return public, secret


def parse_key(text: str, key_dir: Path | None = None) -> bytes:
    """A public key given as 40 Z85 characters, or as a public key file's path."""
    if Z85_KEY.match(text):
        try:
            zmq.utils.z85.decode(text)
        except ValueError as exc:
            raise KeySetupError(f"{text!r} is not a Z85 key: {exc}") from exc
        return text.encode("ascii")
    path = Path(text).expanduser()
    if not path.exists() and key_dir is not None and (key_dir / text).exists():
        path = key_dir / text
    if not path.exists():
        raise KeySetupError(f"{text!r} is neither a public key (40 Z85 characters) nor a key file")
    return read_public(path)


def allow(key_dir: Path, key: str | os.PathLike, name: str) -> Path:
    """Put a public key on the allow-list as allowed/NAME.key; servers of this host let it connect."""
    check_name(name)
    public = parse_key(os.fspath(key), key_dir)
    folder = key_dir / ALLOWED
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    path = folder / f"{name}.key"
    tmp = folder / f".{name}.key.tmp"  # renamed into place: a reload never reads half a file
    tmp.write_text(PUBLIC_CERT.format(key=public.decode("ascii")))
    os.replace(tmp, path)
    return path


def revoke(key_dir: Path, name: str) -> None:
    path = key_dir / ALLOWED / f"{check_name(name)}.key"
    if not path.exists():
        raise KeySetupError(
            f"{name!r} is not on the allow-list of {key_dir}; allowed: {', '.join(sorted(allowed(key_dir))) or 'none'}"
        )
    path.unlink()


def allowed(key_dir: Path) -> dict[str, str]:
    """Name -> public key of every key on the allow-list."""
    folder = key_dir / ALLOWED
    if not folder.is_dir():
        return {}
    return {p.stem: read_public(p).decode("ascii") for p in sorted(folder.glob("*.key"))}
