"""Regenerate docs/tuner.md's option table from the tuner's rule table.

usage: python benchmarks/tuner_docs.py [--check]

With --check, exit 1 (and write nothing) when docs/tuner.md is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hilsim.simmodel.tuner.docs import with_option_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "tuner.md"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    new = with_option_table(text)
    if new == text:
        print(f"{DOC}: up to date")
        return 0
    if "--check" in argv:
        print(f"{DOC}: option table out of date (run python benchmarks/tuner_docs.py)")
        return 1
    DOC.write_text(new, encoding="utf-8")
    print(f"{DOC}: option table regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
