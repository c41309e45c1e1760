"""The house rules, checked on the source tree: files stay small, every judge lives in checks/, imports have no
circles, pdctl and the bundled engine never import each other, one list of layer names, one exposition parser, one
serialiser of results."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pdctl", "engine")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every pdctl/engine module a file imports, at top level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES}


def test_every_judge_lives_in_checks():
    """No `judge_...` outside checks/, and no private `_judge...` in ops/ (ops gathers and calls a judge)."""
    outside = [
        f"{p.relative_to(ROOT)}:{node.name}"
        for name, p in MODULES.items()
        if name.startswith("pdctl.") and not name.startswith("pdctl.checks")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef)
        and (node.name.startswith("judge_") or (name.startswith("pdctl.ops") and node.name.startswith("_judge")))
    ]
    assert outside == []


def test_results_serialise_through_to_data():
    """No hand-written `def to_dict` under pdctl/: a result declares its JSON shape to pdctl.serialize.to_data
    (JSON_OFF, json_key, json_extra, json_omit_empty, json_mask); `to_dict = to_data` is the only allowed alias."""
    written = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for name, p in MODULES.items()
        if name.startswith("pdctl")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "to_dict"
    ]
    assert written == []


def test_no_import_circles_and_no_cross_imports():
    graph = {m: _imports(p) - {m} for m, p in MODULES.items()}
    cross = sorted(f"{m} -> {d}" for m, ds in graph.items() for d in ds if m.split(".")[0] != d.split(".")[0])
    assert cross == []
    # depth-first search for a back edge; a package importing its own submodule is not a circle
    state: dict[str, int] = {}
    circles = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if d.startswith(m + "."):
                continue
            if state.get(d) == 1:
                circles.append(" -> ".join(stack[stack.index(d) :] + [d]))
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


def test_one_list_of_layer_names():
    """Nothing spells the layer names out as a list: they come from checks/layers.py."""
    pattern = re.compile(r"""["']health["']\s*,\s*["']e2e["']\s*,\s*["']transfer["']""")
    spelled = [str(p.relative_to(ROOT)) for p in MODULES.values() if pattern.search(p.read_text())]
    assert spelled == []


def test_no_hand_written_exposition_parser():
    text = (ROOT / "pdctl/checks/metrics.py").read_text()
    assert "text_string_to_metric_families" in text
    assert "def _parse_labels" not in text and "def _parse_sample" not in text
