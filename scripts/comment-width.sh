#!/usr/bin/env bash
# make fmt-check, part two: comments within 100 columns, as rustfmt keeps the code (rustfmt
# cannot wrap comments on stable). A comment line may pass 100 only when it cannot be broken: a
# single word after its `//`, `///` or `//!` (a long path or URL), or a row of a Markdown table
# (rustdoc renders a table only from whole rows). Columns are characters.
#
# Usage: scripts/comment-width.sh (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
git ls-files -z -- '*.rs' | python3 -c '
import re, sys
comment = re.compile(r"^\s*//[/!]?\s*(.*)$")
bad = 0
for path in sys.stdin.read().split("\0"):
    if not path:
        continue
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = comment.match(line)
            text = m.group(1) if m else ""
            if m and len(line) > 100 and re.search(r"\s", text) and not text.startswith("|"):
                print(f"{path}:{n}: comment is {len(line)} columns (at most 100)")
                bad += 1
if bad:
    print(f"comment-width: {bad} comment lines over 100 columns; wrap them")
    sys.exit(1)
print("comment-width: every comment is within 100 columns")
'
