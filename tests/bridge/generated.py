"""One rule for the files the generators under tests/bridge write from Bridge's code.

`put(path, text, check=..., generator=...)` writes a generated file, or, under `--check`,
compares it and writes nothing: a file missing or differing is reported on stderr, naming the
generator that rewrites it, and counts 1 (the generator's exit status); text None means the file
must not exist (writing removes it). `json_text(doc)` is the JSON form the generated tables use:
one-space indent, sorted keys, a final newline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def json_text(doc) -> str:
    """A generated JSON table's text."""
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def put(path: Path, text: str | None, *, check: bool, generator: str, stale: str = "out of date",
        wrote: str = "") -> int:
    """Write `text` at `path` (None: remove it), or with `check` only compare: 1 when the file on
    disk is not `text` (`stale` says how, `generator` names the script that regenerates it),
    else 0. `wrote` adds a summary to the line a write prints."""
    if check:
        have = path.read_text() if path.exists() else None
        if have != text:
            print(f"{path}: {stale}; run tests/bridge/{generator}", file=sys.stderr)
            return 1
        return 0
    if text is None:
        path.unlink(missing_ok=True)
        return 0
    path.write_text(text)
    print(f"wrote {path}" + (f": {wrote}" if wrote else ""), file=sys.stderr)
    return 0
