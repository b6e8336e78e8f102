"""What a prepared sandbox does and does not enforce.

Plain frozen data shared by the Landlock binding (which records skipped rule
paths), the apply layer (which works out what the kernel's ABI cannot
enforce) and ``describe`` (which shows it to a person).
"""

from __future__ import annotations

from typing import NamedTuple


class SkippedPath(NamedTuple):
    """A rule path that was not added to the ruleset, and why."""

    path: str
    reason: str


class Gap(NamedTuple):
    """Something the sandbox does not enforce.

    ``needs_abi`` is the Landlock ABI that would enforce it (``None`` when no
    Landlock version does, e.g. UDP).  ``requested`` is true when the profile
    explicitly asked for the restriction; such a gap is fatal unless the
    profile says ``general.best_effort: true``.
    """

    feature: str
    reason: str
    needs_abi: int | None = None
    requested: bool = False


class EnforcementReport(NamedTuple):
    """The outcome of preparing a sandbox for one effective rule set."""

    abi: int
    enforced: bool
    gaps: tuple[Gap, ...] = ()
    skipped: tuple[SkippedPath, ...] = ()

    @property
    def unenforced(self) -> tuple[str, ...]:
        """One human sentence per gap."""
        return tuple(f"{gap.feature}: {gap.reason}" for gap in self.gaps)
