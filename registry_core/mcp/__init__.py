"""The tool registry as a Model Context Protocol server (``ollie-tools mcp``).

Built on the official ``mcp`` SDK (no protocol code of our own) and placed
beside :mod:`registry_core.cli`: above :mod:`registry_core.dispatch` (every
``tools/call`` runs through the same :class:`~registry_core.dispatch.Dispatcher`
as ``ollie-tools call``) and :mod:`registry_core.broker` (elevated and sudo
tools ask the broker, labelled with the MCP client's name).

- :mod:`.listing`: registry tools → MCP tool definitions (pure);
- :mod:`.results`: dispatcher results → MCP call results (pure);
- :mod:`.cancel`: the cancel hook that kills a call's process group;
- :mod:`.server`: the server itself (handlers, file watching, stdio).

Importing this package imports nothing heavy; :mod:`.server` pulls in the SDK.
"""
