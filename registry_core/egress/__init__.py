"""Network egress of sandboxed tools: host rules, the proxy, the in-sandbox forwarder.

* :mod:`registry_core.egress.rules` -- ``allow_hosts`` / ``deny_hosts`` / ``ask``
  (pure: no I/O);
* :mod:`registry_core.egress.proxy` -- the asyncio HTTP + SOCKS5 proxy outside
  the sandbox, listening on a Unix socket;
* :mod:`registry_core.egress.forwarder` -- the standard-library relay inside the
  sandbox, from the namespace's loopback to that socket.

Importing this package imports neither asyncio nor the proxy.
"""

from __future__ import annotations

PROXY_HOST = "127.0.0.1"


def proxy_environment(port: int) -> dict[str, str]:
    """The variables a sandboxed tool gets to use the forwarder on ``127.0.0.1:port``.

    Both cases, as tools read either; ``NO_PROXY`` is empty: nothing bypasses
    the proxy (nothing else is reachable anyway).
    """
    http = f"http://{PROXY_HOST}:{port}"
    values = {
        "HTTP_PROXY": http,
        "HTTPS_PROXY": http,
        "ALL_PROXY": f"socks5h://{PROXY_HOST}:{port}",
        "NO_PROXY": "",
    }
    return {**values, **{name.lower(): value for name, value in values.items()}}
