"""Wiring agents up: ``ollie-approve install --agent A`` and ``ollie-tools mcp install --client C``.

:mod:`.edit` changes one configuration file (JSON, JSON with comments, TOML, or a
whole file Ollie owns) with a backup, idempotently, and undoes it;
:mod:`.targets` says which file each agent reads and what Ollie puts there (with
where each location and shape was read); :mod:`.cli` is the two commands.
See ``docs/agents/``.
"""
