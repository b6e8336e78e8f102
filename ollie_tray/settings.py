"""The tray's settings file: ``<ollie config dir>/tray.yaml``.

Every tray setting that was only a flag or a variable lives here, so it can be
made permanent without editing the autostart line.  Precedence, lowest first:
built-in defaults, ``tray.yaml``, ``OLLIE_TRAY_REQUIRE_PASSWORD``, flags.

- Missing: written with every key at its default and a comment each.
- Corrupt (not YAML, or not a mapping): renamed ``tray.yaml.corrupt-<UTC time>``
  with a warning naming it; the defaults apply and a fresh file is written —
  except that the login-password requirement is then **on**: whether the
  person had asked for it cannot be known, and asking for a password nobody
  wanted is the safe mistake.
- A field with a wrong value: a warning naming file, field and value; that
  field's default applies (``require_password``: on, as above).
- Unknown keys: a warning naming each; ignored.

:func:`save` rewrites the file from the commented template with the given
values: the template's comments stay, comments a person added are not kept.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from registry_core.paths import ollie_config_dir

log = logging.getLogger(__name__)

FILE_NAME = "tray.yaml"
COUNTDOWN_RANGE = (5, 3600)
ARM_DELAY_RANGE = (300, 5000)


@dataclass(frozen=True)
class TraySettings:
    countdown_s: int = 60
    require_password: bool = False
    arm_delay_ms: int = 700
    verbose: bool = False


DEFAULTS = TraySettings()

_COMMENTS = {
    "countdown_s": (
        "Seconds before an unanswered request is denied"
        f" ({COUNTDOWN_RANGE[0]}-{COUNTDOWN_RANGE[1]}; flag --countdown)."
    ),
    "require_password": (
        "An approval counts only after your login password (PAM)"
        " (flag --require-password, or OLLIE_TRAY_REQUIRE_PASSWORD=1)."
    ),
    "arm_delay_ms": (
        "Milliseconds the Approve button stays disabled after a dialog opens, so a"
        f" click meant for another window cannot approve ({ARM_DELAY_RANGE[0]}-"
        f"{ARM_DELAY_RANGE[1]})."
    ),
    "verbose": "Log informational messages too, not only warnings (flag -v).",
}


def settings_path(env: Mapping[str, str]) -> Path:
    return ollie_config_dir(env) / FILE_NAME


def render(settings: TraySettings = DEFAULTS) -> str:
    """The file's text: every key with its comment and the default it would have."""
    out = [
        "# Ollie Tray settings. Flags given on the command line win over this file.",
        "# Delete a line to get its default back.",
    ]
    for f in fields(TraySettings):
        value = getattr(settings, f.name)
        default = getattr(DEFAULTS, f.name)
        text = yaml.safe_dump(value).removesuffix("\n...\n").strip()
        out += ["", f"# {_COMMENTS[f.name]}", f"# Default: {yaml.safe_dump(default).split()[0]}"]
        out.append(f"{f.name}: {text}")
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def save(env: Mapping[str, str], settings: TraySettings) -> Path:
    """Write ``settings`` to the file (the commented template, these values)."""
    path = settings_path(env)
    _write(path, render(settings))
    return path


def _int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and low <= v <= high


_VALID: dict[str, Callable[[Any], bool]] = {
    "countdown_s": _int_in(*COUNTDOWN_RANGE),
    "require_password": lambda v: type(v) is bool,
    "arm_delay_ms": _int_in(*ARM_DELAY_RANGE),
    "verbose": lambda v: type(v) is bool,
}
# What a field falls back to when its value cannot be trusted (fail closed).
_ON_DOUBT = replace(DEFAULTS, require_password=True)


def _set_aside(path: Path, why: str, now: Callable[[], float]) -> TraySettings:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now()))
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, aside)
    log.warning(
        "%s: %s; kept as %s, defaults apply with require_password on; a fresh file is written",
        path,
        why,
        aside,
    )
    _write(path, render(DEFAULTS))
    return _ON_DOUBT


def load(env: Mapping[str, str], now: Callable[[], float] = time.time) -> TraySettings:
    """The settings of the file (written with the defaults when missing)."""
    path = settings_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        try:
            _write(path, render(DEFAULTS))
        except OSError as exc:
            log.warning("%s: cannot write the default settings: %s", path, exc)
        return DEFAULTS
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s: unreadable (%s); defaults apply with require_password on", path, exc)
        return _ON_DOUBT
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return _set_aside(path, f"not valid YAML ({str(exc).splitlines()[0]})", now)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return _set_aside(path, f"not a mapping of settings but a {type(data).__name__}", now)
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _VALID:
            log.warning("%s: unknown setting %r ignored", path, key)
            continue
        if not _VALID[key](value):
            fallback = getattr(_ON_DOUBT, key)
            log.warning("%s: %s: invalid value %r; using %r", path, key, value, fallback)
            values[key] = fallback
            continue
        values[key] = value
    return replace(DEFAULTS, **values)


def merged(
    file: TraySettings,
    env: Mapping[str, str],
    *,
    countdown: int | None = None,
    require_password: bool = False,
    verbose: bool = False,
) -> TraySettings:
    """The file's settings with the variable and the flags on top (flags win)."""
    from ollie_tray.login_check import require_password_from

    out = file
    if require_password_from(env) or require_password:
        out = replace(out, require_password=True)
    if countdown is not None:
        out = replace(out, countdown_s=countdown)
    if verbose:
        out = replace(out, verbose=True)
    return out
