"""Fixtures of the egress tests (egress_helpers.py)."""

from egress_helpers import harness, web

__all__ = ["harness", "web"]
