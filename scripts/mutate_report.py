"""Per-module kill rates of the last ``make mutate`` runs (read from ``mutants/``).

Usage: ``python scripts/mutate_report.py [GLOB ...]`` (globs over module paths such
as ``registry_core/broker/remember/policies.py``; default: every mutated module).

Killed counts mutants a test failed on, timeouts and crashes; the rate is
killed / (killed + survived + no tests).  Mutants not checked yet are counted
apart: a module with unchecked mutants is only partly measured.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

KILLED = ("killed", "timeout", "segfault", "caught by type check")


def module_counts(meta: Path) -> Counter[str]:
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return Counter(status_by_exit_code[code] for code in codes.values())


def main(globs: list[str]) -> int:
    root = Path("mutants")
    if not root.is_dir():
        print("no mutants/ directory: run `make mutate` first", file=sys.stderr)
        return 1
    print(
        f"{'module':50} {'mutants':>7} {'killed':>6} {'surv.':>5} {'none':>4} "
        f"{'unchecked':>9} {'rate':>6}"
    )
    for meta in sorted(root.rglob("*.py.meta")):
        module = str(meta.relative_to(root))[: -len(".meta")]
        if globs and not any(fnmatch.fnmatch(module, g) for g in globs):
            continue
        counts = module_counts(meta)
        total = sum(counts.values())
        if not total:
            continue
        killed = sum(counts[s] for s in KILLED)
        tested = killed + counts["survived"] + counts["no tests"] + counts["suspicious"]
        rate = f"{100 * killed / tested:.1f}%" if tested else "-"
        print(
            f"{module:50} {total:7} {killed:6} {counts['survived']:5} "
            f"{counts['no tests']:4} {counts['not checked']:9} {rate:>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
