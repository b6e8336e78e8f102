"""Agents' own actions: what ``ollie-approve`` turns a coding agent's tool call into.

- :mod:`.facts`: a tool call (Claude Code's ``Bash``, ``Edit``, ``Write``,
  ``WebFetch``..., or any other agent's) → the action the dialog shows: a
  one-line summary, the exact command or a diff of the edit, the file, and
  the narrowest sensible remember pattern;
- :mod:`.scope`: the rules file saying which actions go to the desktop and
  which pass to the agent's own prompt, with safe defaults;
- :mod:`.realpath`: the file a path really names (symbolic links followed in
  every component), which every judgement above uses;
- :mod:`.hook`: Claude Code's ``PreToolUse`` hook contract and the generic
  JSON contract, in and out.

Above :mod:`registry_core.broker` (it builds ``action`` requests), beside
:mod:`registry_core.cli`; no I/O except looking up the named paths
(``lstat``/``readlink``) and reading the edited file for a diff.
"""
