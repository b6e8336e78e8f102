"""Where things live: XDG base directories and the project's default paths.

Everything takes an explicit environment mapping so tests and the "What if"
simulation never touch ``os.environ``.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def config_home(env: Mapping[str, str]) -> Path:
    value = env.get("XDG_CONFIG_HOME")
    return Path(value) if value else _home(env) / ".config"


def state_home(env: Mapping[str, str]) -> Path:
    value = env.get("XDG_STATE_HOME")
    return Path(value) if value else _home(env) / ".local" / "state"


def cache_home(env: Mapping[str, str]) -> Path:
    value = env.get("XDG_CACHE_HOME")
    return Path(value) if value else _home(env) / ".cache"


def scan_cache_dir(env: Mapping[str, str]) -> Path:
    """Where registry loaders remember what they learnt from unchanged ``.meta`` files."""
    return cache_home(env) / "ollie" / "registry"


def sandbox_tmp_base(env: Mapping[str, str]) -> Path:
    """Where each sandboxed call gets its private ``/tmp`` (one 0700 directory per call).

    ``$XDG_RUNTIME_DIR/ollie-tmp`` (a per-user tmpfs, emptied at logout) when
    the session has one, else ``$XDG_CACHE_HOME/ollie/tmp``; never the shared
    ``/tmp``.
    """
    value = env.get("XDG_RUNTIME_DIR")
    return Path(value) / "ollie-tmp" if value else cache_home(env) / "ollie" / "tmp"


def runtime_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_RUNTIME_DIR``, else a private directory under Ollie's cache directory.

    No XDG_RUNTIME_DIR (e.g. a bare ssh session): never ``/tmp``, which every
    sandbox profile makes writable through ``{TMPDIR}``, so a tool could rename
    the broker's socket and serve its own approvals.  Instead
    ``$XDG_CACHE_HOME/ollie/runtime-<host name>`` (created 0700, with any missing
    parents, by whoever binds a socket there): the dispatcher refuses a working
    directory inside or above Ollie's cache directory and any profile that would
    make the socket's directory writable (``sandbox/guard.py``).  The host name
    keeps two machines that share a network home apart.  See docs/decisions.md.
    """
    value = env.get("XDG_RUNTIME_DIR")
    if value:
        return Path(value)
    return cache_home(env) / "ollie" / f"runtime-{os.uname().nodename}"


def _absolute(value: str) -> Path:
    return Path(os.path.abspath(value))


def ollie_config_dir(env: Mapping[str, str]) -> Path:
    """Ollie's config root, shared with the ollie-core runtime.

    ``$OLLIE_CFG_PATH`` when set and non-empty (ollie-core's own variable, taken
    as is), else ``$XDG_CONFIG_HOME/ollie``, else ``~/.config/ollie``.
    ollie-core itself ignores ``XDG_CONFIG_HOME``: with a non-default
    ``XDG_CONFIG_HOME``, set ``OLLIE_CFG_PATH`` so both read the same files
    (docs/ollie-core.md).
    """
    value = env.get("OLLIE_CFG_PATH")
    if value:
        return _absolute(value)
    return config_home(env) / "ollie"


def ollie_data_dir(env: Mapping[str, str]) -> Path:
    """Ollie's data root as ollie-core defines it.

    ``$OLLIE_DATA_PATH`` when set and non-empty, else ``~/.local/share/ollie``.
    """
    value = env.get("OLLIE_DATA_PATH")
    if value:
        return _absolute(value)
    return _home(env) / ".local" / "share" / "ollie"


def plugins_dir(env: Mapping[str, str]) -> Path:
    """Where ollie-core looks for its plugins (``x/elevate``).

    The first entry of ``$OLLIE_PLUGINS_PATH``, else ``<config root>/scripts/x``.
    """
    raw = env.get("OLLIE_PLUGINS_PATH")
    if raw:
        first = raw.split(":", 1)[0]
        if first:
            return _absolute(first)
    return ollie_config_dir(env) / "scripts" / "x"


def default_tools_dir(env: Mapping[str, str]) -> Path:
    return ollie_config_dir(env) / "tools"


def tools_path(env: Mapping[str, str]) -> list[Path]:
    """The directories of ``$OLLIE_TOOLS_PATH`` in search order (empty entries dropped)."""
    raw = env.get("OLLIE_TOOLS_PATH")
    if not raw:
        return [default_tools_dir(env)]
    return [Path(p) for p in raw.split(":") if p]


def tools_path_string(env: Mapping[str, str]) -> str:
    return ":".join(str(p) for p in tools_path(env))


def sandbox_profile_path(env: Mapping[str, str], name: str) -> Path:
    return ollie_config_dir(env) / "sandbox" / f"{name}.yaml"


def elevate_socket(env: Mapping[str, str]) -> Path:
    value = env.get("OLLIE_ELEVATE_SOCKET")
    return Path(value) if value else runtime_dir(env) / "ollie" / "elevate.sock"


def policies_file(env: Mapping[str, str]) -> Path:
    return ollie_config_dir(env) / "policies.yaml"


def audit_file(env: Mapping[str, str]) -> Path:
    return state_home(env) / "ollie" / "audit.jsonl"


def own_program(name: str) -> str | None:
    """Ollie's own console script ``name`` (``ollie-askpass``, ``ollie-elevate``) of the
    installation that is running, or ``None`` when it has none.

    Looked for next to the running interpreter (a venv's or pipx's ``bin``), and,
    when this package is installed in the user's site-packages (``pip install
    --user``), in that scheme's ``bin`` (``~/.local/bin``) -- never on ``PATH``,
    whose first entries an agent often takes from the project a tool can write.
    Ollie's installation itself is protected: a profile rule or working directory
    that would let a sandboxed tool write it is refused (``sandbox/``).
    """
    places = [os.path.dirname(sys.executable)] if sys.executable else []
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site and os.path.abspath(__file__).startswith(os.path.join(user_site, "")):
        places.append(os.path.join(site.getuserbase(), "bin"))
    for place in places:
        candidate = os.path.join(place, name)
        if os.path.isabs(candidate) and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def resources_dir() -> Path:
    """The repository's / installation's ``resources`` directory."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "resources", here / "resources"):
        if candidate.is_dir():
            return candidate
    return here.parent / "resources"
