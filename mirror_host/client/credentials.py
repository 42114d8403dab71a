"""The credentials ``mirror-host attach`` keeps, one per host address. I/O (files).

``$XDG_CONFIG_HOME/mirror-host/credentials.json`` (default
``~/.config/mirror-host/``), mode 0600, written atomically (temporary file,
fsync, rename, fsync of the directory)::

    {"version": 1, "hosts": {"192.168.1.20:7880":
        {"hostID": "…", "deviceID": "…", "key": "<base64 of 32 bytes>"}}}

The hostID is kept with the key: a host at the same address whose challenge
names another hostID is refused ("host identity changed"), as Prowl's clients
refuse it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from uuid import UUID

from mirror_host.client.address import HostAddress
from mirror_host.client.client import Credential
from mirror_host.errors import ClientError
from mirror_host.files import write_atomic

__all__ = ["CredentialStore", "CredentialStoreError", "default_path"]

FILE_NAME = "credentials.json"
VERSION = 1


class CredentialStoreError(ClientError):
    """The credential file cannot be read or written."""


def default_path(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/mirror-host/credentials.json`` (``~/.config`` by default)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mirror-host" / FILE_NAME


def _encode(credential: Credential) -> dict[str, str]:
    return {
        "hostID": str(credential.host_id).upper(),
        "deviceID": str(credential.device_id).upper(),
        "key": base64.b64encode(credential.key).decode("ascii"),
    }


def _decode(entry: object) -> Credential:
    if not isinstance(entry, dict):
        raise ValueError("an entry is not an object")
    key = base64.b64decode(str(entry["key"]), validate=True)
    if len(key) != 32:
        raise ValueError("a key is not 32 bytes")
    return Credential(UUID(str(entry["hostID"])), UUID(str(entry["deviceID"])), key)


class CredentialStore:
    """Saved device credentials, keyed by host address."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()

    def _read(self) -> dict[str, Credential]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise CredentialStoreError(f"{self.path}: cannot read ({exc.strerror})") from exc
        try:
            document = json.loads(raw)
            if not isinstance(document, dict) or document.get("version") != VERSION:
                raise ValueError(f"not a version {VERSION} credential file")
            hosts = document["hosts"]
            if not isinstance(hosts, dict):
                raise ValueError("hosts is not an object")
            return {str(address): _decode(entry) for address, entry in hosts.items()}
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise CredentialStoreError(
                f"{self.path}: not a credential file ({exc}); move it aside to pair again"
            ) from exc

    def get(self, address: HostAddress) -> Credential | None:
        """The credential saved for ``address``, if any."""
        return self._read().get(address.key)

    def put(self, address: HostAddress, credential: Credential) -> None:
        """Save (or replace) the credential for ``address``."""
        hosts = self._read()
        hosts[address.key] = credential
        self._write(hosts)

    def forget(self, address: HostAddress) -> bool:
        """Remove the credential for ``address``; whether there was one."""
        hosts = self._read()
        if hosts.pop(address.key, None) is None:
            return False
        self._write(hosts)
        return True

    def _write(self, hosts: dict[str, Credential]) -> None:
        document = {
            "version": VERSION,
            "hosts": {address: _encode(c) for address, c in sorted(hosts.items())},
        }
        data = (json.dumps(document, indent=2) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(self.path, data, mode=0o600)
        except OSError as exc:
            raise CredentialStoreError(f"{self.path}: cannot write ({exc.strerror})") from exc
