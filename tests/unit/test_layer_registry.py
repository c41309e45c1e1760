"""The layers extension point: every layer of checks/layers.py has one module in pdctl/ops/layers/ registering it
once; the watch's cadences are layers that own a round; final-health runs what the registry holds."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from pdctl.checks.layers import LAYER_NAMES, LAYERS, TRIAGE_LAYERS, layer, layers_judged_in
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.triage import FINAL_HEALTH_LAYERS, TriageObservations
from pdctl.checks.watch_schedule import CADENCES, cadence_periods
from pdctl.errors import UnreachableError
from pdctl.inventory import WatchSettings
from pdctl.ops import layers as layer_pkg
from pdctl.ops.layers.base import REGISTRY, LayerDef, register
from pdctl.ops.watch_rounds import ROUNDS

LAYER_DIR = Path(layer_pkg.__file__).parent
NOT_LAYERS = {"__init__", "base", "seen"}


def _registered_names(path: Path) -> list[str]:
    """The names a module passes to `register(LayerDef("NAME", ...))`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register":
            (definition,) = node.args
            assert isinstance(definition, ast.Call) and isinstance(definition.args[0], ast.Constant)
            out.append(definition.args[0].value)
    return out


def test_every_layer_is_registered_once_by_its_own_module():
    modules = {p.stem: _registered_names(p) for p in LAYER_DIR.glob("*.py") if p.stem not in NOT_LAYERS}
    assert {stem: names for stem, names in modules.items() if names != [stem]} == {}  # one layer a module, its name
    assert sorted(modules) == sorted(LAYER_NAMES)
    assert [d.name for d in layer_pkg.LAYER_DEFS] == list(LAYER_NAMES)
    assert sorted(REGISTRY) == sorted(LAYER_NAMES)


def test_a_second_registration_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        register(LayerDef("health", start=lambda g: list, round=lambda dep: None))  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        ({"name": "wedge", "run": lambda g: []}, "no entry in checks/layers.py"),
        ({"name": "transfer"}, "exactly one of start"),
        ({"name": "transfer", "run": lambda g: [], "start": lambda g: list}, "exactly one of start"),
        ({"name": "health", "run": lambda g: []}, "a watch round goes with a cadence"),
        ({"name": "lineage", "run": lambda g: [], "round": lambda dep: None}, "a watch round goes with a cadence"),
    ],
)
def test_a_definition_that_breaks_the_contract_is_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        LayerDef(**kwargs)


def test_the_watch_cadences_are_layers_owning_a_round():
    assert list(ROUNDS) == list(CADENCES)
    assert set(CADENCES) <= set(LAYER_NAMES)
    for name in CADENCES:
        assert layer(name).cadence == name and REGISTRY[name].round is ROUNDS[name]
    # every watched layer is judged in a round that exists
    assert {lay.cadence for lay in LAYERS if lay.cadence is not None} == set(CADENCES)
    assert layers_judged_in("flags") == ("flags", "lineage")
    assert layers_judged_in("inflight") == ("transfer", "inflight")


def test_each_cadence_period_is_a_watch_setting_and_each_period_setting_a_cadence():
    fields = {f.name for f in msgspec.structs.fields(WatchSettings)}
    named = {layer(name).every for name in CADENCES}
    assert named <= fields
    periods = {f for f in fields if f.endswith("_every") or f == "inflight_interval"}
    assert periods == named  # a new period setting without a layer (or the reverse) is caught here
    s = WatchSettings(health_every=7.0, flags_every=70.0)
    assert cadence_periods(s) == {"health": 7.0, "e2e": 30.0, "flags": 70.0, "inflight": 1.0, "pairs": 30.0}


def test_triage_reads_the_layers_marked_for_it():
    assert FINAL_HEALTH_LAYERS == TRIAGE_LAYERS == ("health", "e2e", "transfer", "lineage", "pairs")
    assert tuple(TriageObservations().final_health_layers()) == FINAL_HEALTH_LAYERS
    obs = TriageObservations()
    row = CheckResult("e2e", "router[0]", "chat completion", Status.PASS)
    obs.take_final_health({"e2e": [row], "flags": [row]})
    assert obs.final_health_layers() == {"health": [], "e2e": [row], "transfer": [], "lineage": [], "pairs": []}


class _Progress:
    def __init__(self):
        self.events = []

    def emit(self, ev):
        self.events.append(ev)

    def waiting(self, *a, **kw):
        pass


def _dep():
    fh = SimpleNamespace(probe=SimpleNamespace(timeout=5.0), health_timeout=2.0)
    return SimpleNamespace(
        inv=SimpleNamespace(name="t", final_health=fh), progress=_Progress(), connect_all=lambda: None
    )


def _check(name: str, status: Status = Status.PASS) -> CheckResult:
    return CheckResult(name, "x", "c", status)


def test_final_health_runs_the_registry_concurrent_then_sequential_in_layer_order(monkeypatch):
    from pdctl.ops import verify

    order: list[str] = []

    def concurrent(name):
        def start(g):
            fut = g.pool.submit(lambda: [_check(name)])
            return lambda: order.append(name) or fut.result()

        return LayerDef(name, start=start, round=(lambda dep: None) if layer(name).every else None)

    def sequential(name, status=Status.PASS):
        def run(g):
            order.append(name)
            return [_check(name, status)]

        return LayerDef(name, run=run, round=(lambda dep: None) if layer(name).every else None)

    defs = (concurrent("health"), concurrent("transfer"), sequential("inflight", Status.FAIL), sequential("pairs"))
    monkeypatch.setattr(verify, "LAYER_DEFS", defs)
    report = verify.final_health(_dep(), layers=("pairs", "inflight", "transfer", "health"))
    assert order == ["health", "transfer", "inflight", "pairs"]
    assert list(report.layers) == order and not report.ok
    only = verify.final_health(_dep(), layers=("transfer",))
    assert list(only.layers) == ["transfer"]


def test_a_sequential_layer_that_cannot_ask_says_what_was_judged_before_it(monkeypatch):
    from pdctl.ops import verify

    def stuck(g):
        raise UnreachableError("unknown: gpu1 did not answer", target="gpu1")

    ok = LayerDef("health", start=lambda g: lambda: [_check("health")], round=lambda dep: None)
    monkeypatch.setattr(verify, "LAYER_DEFS", (ok, LayerDef("inflight", run=stuck, round=lambda dep: None)))
    with pytest.raises(UnreachableError) as e:
        verify.final_health(_dep(), layers=("health", "inflight"))
    assert e.value.warnings[-1] == "final-health stopped at the inflight layer; judged before it: health pass"


ROOT = Path(__file__).resolve().parents[2]
#: where layer names may be spelled together, and why
SPELLED_ON_PURPOSE = {
    "pdctl/checks/layers.py": "the one list",
    "pdctl/checks/triage.py": "TriageObservations' typed fields by name, held equal to FINAL_HEALTH_LAYERS above",
    "pdctl/ops/heal.py": "DECIDES_AFTER: heal's own choice of the cadences whose evidence confirms a case",
}


def test_the_cadences_heal_waits_for_are_cadences():
    from pdctl.ops.heal import DECIDES_AFTER

    assert set(DECIDES_AFTER) <= set(CADENCES)


def test_no_second_list_of_layer_names():
    """No tuple, list, set or dict keys under pdctl/ spell three or more layer names (CADENCES once did)."""
    names = set(LAYER_NAMES)
    found = []
    for path in sorted((ROOT / "pdctl").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in SPELLED_ON_PURPOSE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) or not elts:
                continue
            spelled = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in names}
            if len(spelled) >= 3:
                found.append(f"{rel}:{node.lineno}")
    assert found == []
