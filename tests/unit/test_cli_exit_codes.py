"""Exit codes: one enum (pdctl.errors.ExitCode), one map from a code to its word (EXIT_KINDS), read alike by the
CLI's error document and the audit log's result words; no bare exit numbers in the CLI."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from pdctl import errors
from pdctl.errors import EXIT_KINDS, ExitCode, exit_kind

REPO = Path(__file__).resolve().parents[2]


def _error_classes() -> list[type[errors.PdctlError]]:
    out, todo = [], [errors.PdctlError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def test_the_codes_are_the_documented_numbers():
    assert [int(c) for c in (ExitCode.OK, ExitCode.CHECK_FAILED, ExitCode.USAGE)] == [0, 1, 2]
    assert [int(c) for c in (ExitCode.UNREACHABLE, ExitCode.REFUSED, ExitCode.INTERRUPTED)] == [3, 4, 130]
    assert json.dumps({"exit_code": ExitCode.UNREACHABLE}) == '{"exit_code": 3}'  # the JSON contract: a number
    assert f"exit {ExitCode.REFUSED}" == "exit 4"


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_exits_with_a_code_of_the_enum_that_has_a_word(cls):
    assert isinstance(cls.exit_code, ExitCode)
    assert cls.exit_code in EXIT_KINDS


def test_a_code_without_a_word_of_its_own_is_failed():
    assert exit_kind(ExitCode.UNREACHABLE) == "unreachable"
    assert exit_kind(ExitCode.READER_GONE) == "failed"
    assert exit_kind(7) == "failed"


@pytest.mark.parametrize("code", sorted(EXIT_KINDS))
def test_the_error_document_and_the_audit_log_say_the_same_word(code, capsys):
    from pdctl.audit import result_word
    from pdctl.cli.common import report_error

    assert report_error(code, "it broke", None, json_out=True) == code
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["exit_code"] == int(code) and doc["error"]["kind"] == EXIT_KINDS[code]
    # an error recorded with the code the CLI gave it: its word in `pdctl history` is the document's kind
    assert result_word({"result": "StepFailed: it broke", "exit_code": int(code)}).word == EXIT_KINDS[code]


def test_an_internal_error_keeps_its_own_kind(capsys):
    from pdctl.cli.common import report_error

    report_error(ExitCode.CHECK_FAILED, "boom", None, json_out=True, kind="internal")
    assert json.loads(capsys.readouterr().out)["error"] == {
        "exit_code": 1,
        "kind": "internal",
        "message": "boom",
        "hint": None,
    }


#: files of others still spelling an exit code as a number (to be named by their owners, then removed from here)
KNOWN_BARE: set[str] = set()
_BARE = re.compile(r"typer\.Exit\(\d|sys\.exit\(\d|exit_code\s*=\s*\d|\bcode\s*=\s*\d")


def test_the_cli_names_its_exit_codes():
    bare = []
    for path in sorted((REPO / "pdctl/cli").glob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel in KNOWN_BARE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Call, ast.Assign, ast.keyword, ast.Compare)):
                src = ast.get_source_segment(path.read_text(), node) or ""
                if _BARE.search(src):
                    bare.append(f"{rel}:{node.lineno}: {src[:60]}")
    assert bare == []
