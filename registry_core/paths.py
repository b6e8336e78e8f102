"""Where things live: XDG base directories and the project's default paths.

Everything takes an explicit environment mapping so tests and the "What if"
simulation never touch ``os.environ``.
"""

from __future__ import annotations

import os
import site
import stat
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
    runtime = session_runtime_dir(env)
    return runtime / "ollie-tmp" if runtime else cache_home(env) / "ollie" / "tmp"


SYSTEM_RUNTIME_ROOT = "/run/user"


def session_runtime_dir(env: Mapping[str, str]) -> Path | None:
    """The login session's runtime directory: ``$XDG_RUNTIME_DIR``, else
    ``/run/user/<uid>`` when it exists, is a real directory of this user and
    is 0700 (what systemd-logind makes), else ``None``.

    Agents often start MCP servers and hooks with a short, filtered environment
    (HOME, PATH, SHELL, TERM) without ``XDG_RUNTIME_DIR``: looking where logind
    puts the directory finds the tray's socket all the same.
    """
    value = env.get("XDG_RUNTIME_DIR")
    if value:
        return Path(value)
    candidate = Path(SYSTEM_RUNTIME_ROOT) / str(os.getuid())
    try:
        info = os.lstat(candidate)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o777 == 0o700:
        return candidate
    return None


def runtime_dir(env: Mapping[str, str]) -> Path:
    """The session's runtime directory (:func:`session_runtime_dir`), else a private
    directory under Ollie's cache directory.

    No runtime directory at all (a bare ssh session without logind): never ``/tmp``,
    which every sandbox profile makes writable through ``{TMPDIR}``, so a tool could rename
    the broker's socket and serve its own approvals.  Instead
    ``$XDG_CACHE_HOME/ollie/runtime-<host name>`` (created 0700, with any missing
    parents, by whoever binds a socket there): the dispatcher refuses a working
    directory inside or above Ollie's cache directory and any profile that would
    make the socket's directory writable (``sandbox/guard.py``).  The host name
    keeps two machines that share a network home apart.  See docs/decisions.md.
    """
    runtime = session_runtime_dir(env)
    if runtime is not None:
        return runtime
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


def own_program_dirs() -> list[str]:
    """Where the running installation keeps its console scripts (:func:`own_program`).

    The running interpreter's directory (a venv's or pipx's ``bin``), and, when this
    package is installed in the user's site-packages (``pip install --user``), that
    scheme's ``bin`` (``~/.local/bin``).  ``sandbox/protected.py`` protects them.
    """
    places = [os.path.dirname(sys.executable)] if sys.executable else []
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site and os.path.abspath(__file__).startswith(os.path.join(user_site, "")):
        places.append(os.path.join(site.getuserbase(), "bin"))
    return places


def own_program(name: str) -> str | None:
    """Ollie's own console script ``name`` (``ollie-askpass``, ``ollie-elevate``) of the
    installation that is running, or ``None`` when it has none.

    Looked for next to the running interpreter (a venv's or pipx's ``bin``), and,
    when this package is installed in the user's site-packages (``pip install
    --user``), in that scheme's ``bin`` (``~/.local/bin``) -- never on ``PATH``,
    whose first entries an agent often takes from the project a tool can write.
    Ollie's installation itself is protected: a profile rule or working directory
    that would let a sandboxed tool write it is refused (``sandbox/protected.py``).
    """
    for place in own_program_dirs():
        candidate = os.path.join(place, name)
        if os.path.isabs(candidate) and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


RESOURCES_ENV = "OLLIE_RESOURCES_DIR"
"""A packager's override: the directory holding ``sandbox/``, ``examples/``, ``icons/``..."""

SHARE_NAME = "ollie-tray"


def _resource_roots() -> list[tuple[Path, Path]]:
    """(resources, desktop files) candidates, in the order they are tried."""
    here = Path(__file__).resolve().parent
    shipped = here / "_data"
    roots = [
        (here.parent / "resources", here.parent / "desktop"),  # a checkout
        (shipped, shipped / "desktop"),  # a wheel: inside the package
    ]
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, "/usr/local", "/usr")):
        share = Path(prefix) / "share" / SHARE_NAME  # a distribution's package
        roots.append((share, share / "desktop"))
    return roots


def _resources(env: Mapping[str, str] | None) -> tuple[Path, Path]:
    override = (os.environ if env is None else env).get(RESOURCES_ENV)
    if override:
        root = Path(override)
        return root, root / "desktop"
    roots = _resource_roots()
    for resources, desktop in roots:
        if (resources / "sandbox" / "default.yaml").is_file():
            return resources, desktop
    return roots[0]


def resources_dir(env: Mapping[str, str] | None = None) -> Path:
    """The shipped data: the default sandbox profile, the demo tools, the icons.

    ``$OLLIE_RESOURCES_DIR`` when set (for packagers); else the first of: the
    checkout's ``resources/``, the wheel's ``registry_core/_data``, and
    ``<prefix>/share/ollie-tray`` for ``sys.prefix``, ``/usr/local`` and ``/usr``
    (docs/packaging.md) that holds the default profile.
    """
    return _resources(env)[0]


def desktop_dir(env: Mapping[str, str] | None = None) -> Path:
    """The shipped desktop files (launcher, autostart entry, systemd unit, metainfo),
    found beside :func:`resources_dir` (``desktop/`` in a checkout and below it otherwise)."""
    return _resources(env)[1]
