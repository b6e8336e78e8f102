"""Who is on the other end of a Unix socket, as the kernel says (``SO_PEERCRED``).

Both ends use it: the client checks that the broker runs as the same user, the
server learns the requester's pid and uid (:mod:`registry_core.broker.peer`).
"""

from __future__ import annotations

import socket
import struct


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of a Unix socket peer, from the kernel."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return pid, uid, gid
