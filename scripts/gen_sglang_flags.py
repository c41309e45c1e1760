"""Write engine/assets/sglang-0.5.23-flags.json from `python -m sglang.launch_server --help` of SGLang 0.5.23.

The bundled engine's parser registers every SGLang flag in SGLang's order, so that an abbreviation resolves, or is
refused as ambiguous, exactly as SGLang's own argparse parser does it. Only facts of the help text are kept: the
option strings, whether the flag takes values (and how many), and its choices.

Usage: python3 scripts/gen_sglang_flags.py [HELP_TXT] (default: the copy under tests/unit/fixtures)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELP = ROOT / "tests/unit/fixtures/sglang-0.5.23-launch_server-help.txt"
OUT = ROOT / "engine/assets/sglang-0.5.23-flags.json"


def _nargs(metavar: str) -> tuple[str | int | None, list[str] | None]:
    """argparse's rendering of one option's metavar back to (nargs, choices); nargs None means a flag."""
    if not metavar:
        return None, None
    choices = None
    m = re.search(r"\{([^}]*)\}", metavar)
    if m:
        choices = m.group(1).split(",")
    if metavar.endswith("...]"):
        return ("*" if metavar.startswith("[") else "+"), choices
    if metavar.startswith("[") and metavar.endswith("]"):
        return "?", choices
    return 1, choices


def parse_help(text: str) -> list[dict]:
    out = []
    in_options = False
    for line in text.splitlines():
        if line.startswith("options:") or line.startswith("optional arguments:"):
            in_options = True
            continue
        if not in_options or not line.startswith("  -"):
            continue
        # the invocation runs up to the help column (two spaces or more); aliases are joined by ", -"
        invocation = re.split(r" {2,}", line[2:], maxsplit=1)[0]
        parts = [p.strip() for p in re.split(r", (?=-)", invocation)]
        strings = [p.split(" ", 1)[0] for p in parts]
        if "--help" in strings:
            continue
        metavar = parts[0].split(" ", 1)[1] if " " in parts[0] else ""
        nargs, choices = _nargs(metavar)
        negated = [s for s in strings if s.startswith("--no-")]
        kind = "bool_optional" if negated and nargs is None else "flag" if nargs is None else "value"
        entry = {
            "options": [s for s in strings if s not in negated] if kind == "bool_optional" else strings,
            "kind": kind,
        }
        if kind == "value":
            entry["nargs"] = nargs
        if choices:
            entry["choices"] = choices
        out.append(entry)
    return out


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else HELP
    flags = parse_help(src.read_text())
    # one flag a line: a later SGLang's list diffs readably against this one
    lines = ",\n".join(json.dumps(f) for f in flags)
    OUT.write_text(
        '{"sglang": "0.5.23", "source": "python -m sglang.launch_server --help", "flags": [\n' + lines + "\n]}\n"
    )
    print(f"{OUT.relative_to(ROOT)}: {len(flags)} flags")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
