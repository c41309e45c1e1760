"""`pdctl status` and `pdctl verify final-health` at 80 columns against a real bundled-engine deployment of 3 prefills,
3 decodes and 1 sglang-router on this machine (free ports), under a long host name so that an instance's label
(`prefill[0]@gpu-host-1.example.internal:PORT`) leaves little room: one row per instance, the verdict first, the
failing instance's expected and found on the screen, no label cut, a bounded number of lines."""

from __future__ import annotations

import re

import pytest

from tests.e2e.helpers import deployed, pdctl, write_inventory
from tests.fixtures.net import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

HOST = "gpu-host-1.example.internal"  # a local host under a name as long as a real one
N = 3
WIDTH = {"COLUMNS": "80"}


def inventory(name: str) -> dict:
    worker = {"host": HOST, "ready_timeout": 300}
    return {
        "name": name,
        "engine": "bundled",
        "hosts": {HOST: {"transport": "local", "service_manager": "pidfile"}},
        "roles": {
            "prefill": [{**worker, "port": free_port(), "bootstrap_port": free_port()} for _ in range(N)],
            "decode": [{**worker, "port": free_port()} for _ in range(N)],
            "router": [
                {
                    **worker,
                    "port": free_port(),
                    "args": {"--prometheus-port": free_port(), "--health-check-interval-secs": 2, "--policy": "random"},
                }
            ],
        },
    }


def labels(inv: dict) -> list[str]:
    return [
        f"{role}[{i}]@{HOST}:{inst['port']}"
        for role in ("prefill", "decode", "router")
        for i, inst in enumerate(inv["roles"][role])
    ]


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    yield from deployed(tmp_path_factory, "xpyd-screens", inventory("xpyd-screens"))


def _run(dep, *args: str, inv=None):
    return pdctl([*args, "-i", str(inv or dep["inv"])], state=dep["state"], env=WIDTH, timeout=180)


def rows_of(lines: list[str], label: str) -> list[int]:
    return [i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(label)}(\s|$)", line)]


def assert_fits(lines: list[str], idents: list[str]) -> None:
    assert all(len(line.rstrip()) <= 80 for line in lines), [x for x in lines if len(x.rstrip()) > 80]
    assert "…" not in "\n".join(lines)
    for ident in idents:
        assert any(ident in line for line in lines), (ident, "\n".join(lines))


def test_status_is_one_row_per_instance_at_80_columns(dep):
    r = _run(dep, "status")
    assert r.code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"status: {2 * N + 1} of {2 * N + 1} running", r.stdout
    everyone = labels(dep["data"])
    assert_fits(lines, everyone)
    for label in everyone:
        (i,) = rows_of(lines, label)
        assert "running" in lines[i], lines[i]
    assert len(lines) <= 2 * len(everyone) + 5, r.stdout  # + the verdict, title, header, rule, watch line


def test_final_health_names_the_drifting_decode_in_a_few_lines(dep):
    drift = dict(dep["data"])
    drift["roles"] = {**drift["roles"], "decode": [dict(d) for d in drift["roles"]["decode"]]}
    drift["roles"]["decode"][1]["args"] = {"--max-running-requests": 7}  # declared, not live: a drift
    path = write_inventory(dep["state"] / "drift.yaml", drift)
    r = _run(dep, "verify", "final-health", inv=path)
    assert r.code == 1, r.output
    lines = r.stdout.splitlines()
    broken = labels(dep["data"])[N + 1]
    assert lines[0].startswith("final-health: FAIL (1 check(s) failed in: flags)"), r.stdout
    assert_fits(lines, [broken, "--max-running-requests", "(expected 7)", "absent"])
    assert lines[1].startswith("next: pdctl deploy --dry-run") and lines[-1].startswith("final-health: FAIL -- next:")
    assert not any(label in r.stdout for label in labels(dep["data"]) if label != broken)
    assert len(lines) <= 16, r.stdout


def test_final_health_verbose_is_one_row_per_instance_per_layer(dep):
    r = _run(dep, "verify", "final-health", "-v", "--json")
    assert r.code == 0, r.output
    layers = r.json()["layers"]
    r = _run(dep, "verify", "final-health", "-v")
    assert r.code == 0, r.output
    text = r.stdout
    lines = text.splitlines()
    assert lines[0] == "final-health: PASS"
    assert_fits(lines, labels(dep["data"]))
    titles = [t for t in re.findall(r"^\d\. .+$", text, flags=re.M)]
    assert len(titles) == len(layers) == 5, text
    starts = [text.index(t + "\n") for t in titles] + [len(text)]
    for k, (name, results) in enumerate(layers.items()):
        section = text[starts[k] : starts[k + 1]].splitlines()
        for label in dict.fromkeys(row["target"] for row in results):
            assert len(rows_of(section, label)) == 1, (name, label, section)
    checks = sum(len(rs) for rs in layers.values())
    # rows per instance, not a block of 3-4 lines per check
    assert len(lines) <= 1.5 * checks, (len(lines), checks)
