"""The house rules, checked on the source tree: files stay small, every judge lives in checks/, imports have no
circles, pdctl and the bundled engine never import each other, no package imports against the arrows (checks/ never
imports ops/ or transport/, render/ never imports ops/, ...), one list of layer names, one exposition parser, one
serialiser of results, no private API of typer, click or rich."""

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


# -- the named libraries used as offered: no private API of typer, click or rich ---------------------------------

LIBRARIES = ("typer", "click", "rich")
#: known uses of a private API, each named for its owner to remove (then delete its line here)
KNOWN_PRIVATE: set[str] = set()


def _private_uses(path: Path, root: Path = ROOT) -> list[str]:
    """What a file takes from typer, click or rich that is not theirs to give: a private module or name
    (`typer._click`, `typer.models`, `from rich.x import _y`), a library attribute replaced (`rich.text.f = ...`),
    a private method of a library class overridden (`def _render_buffer` in a Console), `getattr(x, "_private")`."""
    import importlib

    rel = str(path.relative_to(root))
    in_the_cli = rel.startswith(("pdctl/cli/", "pdctl/render/"))  # where typer's and rich's objects are handled
    tree = ast.parse(path.read_text())
    found, imported = [], {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            for a in node.names:
                full = f"{mod}.{a.name}" if mod else a.name
                if full.split(".")[0] not in LIBRARIES:
                    continue
                if any(part.startswith("_") for part in full.split(".")) or full.startswith("typer.models"):
                    found.append(f"{rel}: imports {full}")
                imported[(a.asname or a.name).split(".")[0]] = full if mod else a.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                root = t
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(t, ast.Attribute) and isinstance(root, ast.Name) and root.id in LIBRARIES:
                    found.append(f"{rel}: assigns {ast.unparse(t)}")
        elif (
            in_the_cli and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        ):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and str(node.args[1].value)[:1] == "_":
                if not str(node.args[1].value).startswith("__"):
                    found.append(f"{rel}: getattr {node.args[1].value}")
        elif isinstance(node, ast.ClassDef):
            bases = []
            for b in node.bases:
                if isinstance(b, ast.Name) and b.id in imported and "." in imported[b.id]:
                    mod, _, attr = imported[b.id].rpartition(".")
                    bases.append(getattr(importlib.import_module(mod), attr))
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("_") and not item.name.startswith("__"):
                    if any(hasattr(b, item.name) for b in bases):
                        found.append(f"{rel}: overrides {node.name}.{item.name}")
    return found


def test_no_private_api_of_typer_click_or_rich():
    uses = [u for name, p in MODULES.items() if name.startswith("pdctl") for u in _private_uses(p)]
    assert sorted(set(uses) - KNOWN_PRIVATE) == []


def test_the_private_api_check_finds_each_kind(tmp_path):
    sample = tmp_path / "pdctl" / "render" / "sample.py"  # read only by the check: never imported
    sample.parent.mkdir(parents=True)
    sample.write_text(
        "import rich.text\n"
        "from typer._click.globals import get_current_context\n"
        "from rich.console import Console\n"
        "rich.text.strip_control_codes = str\n"
        "class C(Console):\n"
        "    def _render_buffer(self, buffer):\n"
        "        return getattr(buffer, '_private')\n"
    )
    uses = _private_uses(sample, root=tmp_path)
    kinds = sorted(u.split(": ", 1)[1].split(" ")[0] for u in uses)
    assert kinds == ["assigns", "getattr", "imports", "overrides"]


# -- package arrows: an arrow never runs back up (docs/architecture.md, "Allowed arrows") -------------------------

#: package of pdctl -> the packages of pdctl it never imports, at top level or inside a function
NEVER_IMPORTS = {
    "checks": {"ops", "transport", "services", "playbook", "cli", "render"},  # every judge pure, fed typed observations
    "render": {"ops", "services", "cli"},  # types and wording only: it calls no op (transport's types it may name)
    "transport": {"ops", "services", "checks", "playbook", "cli", "render"},  # how to reach a host, nothing above
    "services": {"ops", "playbook", "cli", "render"},
    "ops": {"playbook", "cli", "render"},  # ops never prints and never knows who called
    "playbook": {"cli", "render"},
}
#: edges that break a rule today, each named for its owner to remove (then delete its line here and the rule holds)
KNOWN_EDGES: set[tuple[str, str]] = set()  # empty: checks/proc -> transport went in 0d2dc52, render -> ops in ca71d5c


def _package(module: str) -> str:
    """`pdctl.checks.proc` -> "checks"; `pdctl.errors` -> "errors" (a top-level module is its own package)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "pdctl" and len(parts) > 1 else parts[0]


def _backward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a pdctl module that a package rule forbids, and every import of the CLI from the library
    (only `pdctl.__main__` starts it)."""
    out = []
    for m, deps in graph.items():
        if not m.startswith("pdctl."):
            continue
        for d in sorted(deps):
            src, dst = _package(m), _package(d)
            if src == dst or not d.startswith("pdctl."):
                continue
            if dst in NEVER_IMPORTS.get(src, ()) or (dst == "cli" and src != "__main__"):
                out.append(f"{m} -> {d}")
    return out


def test_no_package_imports_against_the_arrows():
    graph = {m: _imports(p) - {m} for m, p in MODULES.items()}
    known = {f"{a} -> {b}" for a, b in KNOWN_EDGES}
    assert sorted(set(_backward_edges(graph)) - known) == []


def test_the_package_rules_find_an_arrow_back_up():
    graph = {
        "pdctl.checks.health": {"pdctl.ops.verify", "pdctl.errors"},
        "pdctl.render.status": {"pdctl.checks.result", "pdctl.ops.lifecycle"},
        "pdctl.transport.ssh": {"pdctl.cli.common"},
        "pdctl.ops.verify": {"pdctl.checks.health", "pdctl.transport.base"},
        "pdctl.__main__": {"pdctl.cli.app"},
    }
    assert _backward_edges(graph) == [
        "pdctl.checks.health -> pdctl.ops.verify",
        "pdctl.render.status -> pdctl.ops.lifecycle",
        "pdctl.transport.ssh -> pdctl.cli.common",
    ]
