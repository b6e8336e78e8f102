"""Machine output: one JSON document, encoded by the C encoder.

``json.dump`` to a stream, and any ``indent``, take the pure-Python encoder
(several times slower on a 10,000-tool list); ``json.dumps`` without indent
takes the C one.  A person at a terminal gets the indented form; a pipe (an
agent, ``jq``) gets the compact one.
"""

from __future__ import annotations

import json
from typing import Any, TextIO


def write_json(obj: Any, out: TextIO) -> None:
    """``obj`` and a newline on ``out``: indented on a terminal, compact otherwise."""
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty():
        text = json.dumps(obj, indent=2)
    else:
        text = json.dumps(obj, separators=(",", ":"))
    out.write(text)
    out.write("\n")
