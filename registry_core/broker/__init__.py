"""The elevation broker: wire protocol, server core, client, policies and prompters.

Import the pieces from their modules (``registry_core.broker.wire.codec``,
``registry_core.broker.wire.messages``, ...); this package does nothing at
import time.
"""
