"""Who said yes to "Remember in keyring": the consent the tray needs before any keyring use.

Merely asking a Secret Service for an entry can make the desktop show an
unlock or "choose a password for the new keyring" prompt, in the middle of a
sudo decision and seconds late.  So the tray never touches the keyring (not
even to probe whether one exists) for a ``user@host`` unless the person
ticked "Remember in keyring" for it before.  That consent is recorded here,
in our own config (``~/.config/ollie/keyring-consent.json``, mode 0600,
written atomically), not in the keyring itself.

A missing, unreadable or corrupt file means "no consent" (fail closed: the
worst case is a password dialog instead of a stored password); a corrupt one
is logged and rewritten on the next change.  Used from the Qt thread only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from registry_core import paths
from registry_core.broker.remember.policy_file import write_atomic
from registry_core.errors import PolicyError

log = logging.getLogger(__name__)

FILE_NAME = "keyring-consent.json"
_MAX_BYTES = 64 * 1024


def consent_file(env: Mapping[str, str]) -> Path:
    return paths.ollie_config_dir(env) / FILE_NAME


class KeyringConsent:
    """The set of ``user@host`` keys whose sudo password may live in the keyring."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> set[str]:
        try:
            with self.path.open("rb") as fh:
                raw = fh.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return set()
        except OSError as exc:
            log.warning("keyring consent: cannot read %s: %s", self.path, exc.strerror or exc)
            return set()
        try:
            if len(raw) > _MAX_BYTES:
                raise ValueError(f"larger than {_MAX_BYTES} bytes")
            data = json.loads(raw.decode("utf-8"))
            keys = data.get("remember_in_keyring") if isinstance(data, dict) else None
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("'remember_in_keyring' must be a list of \"user@host\" strings")
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning(
                "keyring consent: %s is not valid (%s): treated as no consent", self.path, exc
            )
            return set()
        return set(keys)

    def _write(self, keys: set[str]) -> None:
        text = json.dumps({"remember_in_keyring": sorted(keys)}, indent=2) + "\n"
        try:
            write_atomic(self.path, text)
        except PolicyError as exc:
            log.warning("keyring consent: %s", exc)

    def granted(self, user: str, host: str) -> bool:
        return f"{user}@{host}" in self._read()

    def grant(self, user: str, host: str) -> None:
        keys = self._read()
        key = f"{user}@{host}"
        if key not in keys:
            self._write(keys | {key})

    def revoke(self, user: str, host: str) -> None:
        keys = self._read()
        key = f"{user}@{host}"
        if key in keys:
            self._write(keys - {key})
