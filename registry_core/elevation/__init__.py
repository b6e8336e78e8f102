"""The elevation broker: wire protocol, server core, client, policies and prompters.

Import the pieces from their modules (``registry_core.elevation.protocol``,
``registry_core.elevation.messages``, ...); this package does nothing at
import time.
"""
