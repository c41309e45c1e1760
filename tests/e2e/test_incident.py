"""`pdctl incident` writes the write-up of a drill run end to end (issue 30: drill, watch, page, heal): a real local
1P1D (bundled engine, the default router, free ports) with the degraded-bootstrap drill armed on its prefill;
`pdctl watch --heal off` with a timeline and short cadences, scraped by a real Prometheus with the shipped rules; the
operator breaks the pair with a decode-only restart (hazard guard overridden); the watch fails and Prometheus pages
(PdctlPairBroken); then a `pdctl watch --heal on` takes over the same exporter address and timeline and heals it
(the degraded-bootstrap case: one co-restart). Then `pdctl incident` writes the markdown and the HTML: the sections
are there (the operator's restart, the page and the heal in the timeline, in that order, every alert that fired,
charts, root cause, ruled out, configuration, verification, versions, the stamp), and the HTML, rendered in
headless Chromium, holds the charts as inline SVG with plotted paths and fetches nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import datetime

import httpx
import pytest

from tests.e2e.helpers import FAST_WATCH, REPO, deployed, local_inventory, pdctl
from tests.e2e.test_watch import _scrape, _series, _timeline, _until
from tests.fixtures.chromium import render
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

NAME = "incident-drill"
SECTIONS = (
    "Summary",
    "Timeline",
    "Charts",
    "Root cause",
    "Ruled out",
    "Configuration",
    "Verification after the fix",
    "Versions",
    "Gaps",
)


@pytest.fixture(scope="module")
def drill(tmp_path_factory):
    """The deployment, broken by the operator, paged on and healed by the watch, with the timeline and Prometheus.

    The shipped heal acts on the first failed canary of a pair whose lineage says degraded bootstrap, before
    PdctlPairBroken (3 failed canaries in a row) can fire. So, as an on-call shift would see it: the watch runs
    without healing (`--heal off`) until Prometheus fires the page; then that watch is stopped (SIGTERM) and one
    with `--heal on` takes over the same exporter address and timeline file (the watch appends) and heals."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        NAME,
        ports,
        prefill_env={"PDCTL_DRILLS": "degraded-bootstrap", "HF_TOKEN": "hf_incidentsecret123"},
        decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "3"},
    )
    inv["watch"] = dict(FAST_WATCH)
    # a canary sent while the decode is down (or mid-heal) waits its whole slot, the probe timeout: 10 s, not the
    # default 30, is ample for this tiny engine (a canary takes well under a second, a broken pair fails in 3 s)
    inv["final_health"] = {"probe": {"timeout": 10}}
    for dep in deployed(tmp_path_factory, NAME, inv):
        tl, port = dep["state"] / "timeline.jsonl", free_port()
        watches: list[subprocess.Popen] = []
        try:
            with Prometheus({"pdctl-watch": [f"127.0.0.1:{port}"]}) as prom:
                watches.append(_watch(dep, "off", port, tl))
                _until(
                    "the watch's first pair canary passing",
                    lambda: set(_series(_scrape(port), "pdctl_pair_ok").values()) == {1.0},
                    60,
                )
                r = pdctl(
                    [
                        "restart",
                        "--role",
                        "decode",
                        "--override-hazard",
                        "--no-verify",
                        "--json",
                        "-i",
                        str(dep["inv"]),
                    ],
                    state=dep["state"],
                    env={"PDCTL_OPERATOR": "alice-oncall"},
                    timeout=300,
                )
                assert r.code == 0, r.output
                _until("a failing check in the timeline", lambda: _failed(tl), 90)
                page = prom.wait_alert("PdctlPairBroken", timeout=120, deployment=NAME)
                # the write-up dates a page by ALERTS read at 1 s steps: the heal comes after that step, so after
                # the page in its timeline
                fired_at = datetime.fromisoformat(page["activeAt"].replace("Z", "+00:00")).timestamp()
                _until("the page firing for 2 s", lambda: time.time() > fired_at + 2, 10)
                assert not _heals(tl, "started"), "the watch without --heal healed"
                _stop(watches[0])
                assert watches[0].returncode == 130, watches[0].stderr.read() if watches[0].stderr else ""
                watches.append(_watch(dep, "on", port, tl))
                done = _until("the second watch's heal done", lambda: _heals(tl, "done"), 150)
                _until(
                    "the pair passing after the heal",
                    lambda: (
                        [x for x in _timeline(tl) if x.get("event") == "pair" and x["t"] > done[0]["t"]]
                        and set(_series(_scrape(port), "pdctl_pair_ok").values()) == {1.0}
                    ),
                    90,
                )
                yield {**dep, "tl": tl, "prom": prom.url, "ports": ports, "page": page}
        finally:
            for w in watches:
                _stop(w)


def _watch(dep, heal: str, port: int, tl) -> subprocess.Popen:
    """`pdctl watch --heal HEAL` on the exporter address and timeline file given (both shared by the drill's two
    watches), for longer than the drill; stopped by _stop."""
    env = dict(os.environ, XDG_STATE_HOME=str(dep["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    argv = [sys.executable, "-m", "pdctl", "watch", "-i", str(dep["inv"]), "--heal", heal]
    return subprocess.Popen(
        [*argv, "--listen", f"127.0.0.1:{port}", "--timeline", str(tl), "--for", "400"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(watch: subprocess.Popen) -> None:
    """SIGTERM the watch (by its pid) and wait for it; SIGKILL when it does not stop."""
    if watch.poll() is None:
        watch.terminate()
        try:
            watch.wait(20)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait(10)


def _failed(tl) -> list[dict]:
    return [x for x in _timeline(tl) if "event" not in x and x.get("status") == "fail"]


def _fired(drill) -> set[str]:
    expr = f'count by (alertname) (count_over_time(ALERTS{{alertstate="firing",deployment="{NAME}"}}[30m]))'
    r = httpx.get(f"{drill['prom']}/api/v1/query", params={"query": expr}, timeout=10).json()
    return {x["metric"]["alertname"] for x in r["data"]["result"]}


def _row(rows: list[str], kind: str, what: str) -> int:
    """The index of the first timeline row of that kind whose "what" column starts with `what`."""
    hits = [i for i, r in enumerate(rows) if f"| {kind} | {what}" in r]
    assert hits, f"no timeline row {kind} {what!r}"
    return hits[0]


def _heals(tl, outcome: str) -> list[dict]:
    return [x for x in _timeline(tl) if x.get("event") == "heal" and x.get("outcome") == outcome]


@pytest.fixture(scope="module")
def written(drill, tmp_path_factory):
    out = tmp_path_factory.mktemp("writeup") / "drill"
    r = pdctl(
        ["incident", "-i", str(drill["inv"]), "--timeline", str(drill["tl"]), "--prometheus", drill["prom"]]
        + ["--out", str(out), "--json"],
        state=drill["state"],
        env={"PDCTL_OPERATOR": "bob-postmortem"},
        timeout=300,
    )
    assert r.code == 0, r.output
    return r.json(), out


def test_the_write_up_has_every_section_and_tells_the_drill(drill, written):
    doc, out = written
    assert doc["ok"] and doc["healthy_now"] is True and doc["sections"] == list(SECTIONS)
    assert doc["entries"]["page"] >= 1 and doc["entries"]["heal"] >= 2 and doc["entries"]["action"] >= 2
    md = (out.parent / "drill.md").read_text()
    assert doc["written"]["markdown"] == str(out.parent / "drill.md")
    for s in SECTIONS:
        assert f"\n## {s}\n" in md, s
    timeline = md.split("\n## Timeline\n", 1)[1].split("\n## ", 1)[0]
    assert "pdctl restart --role decode --override-hazard --no-verify" in timeline and "alice-oncall" in timeline
    assert re.search(r"\| heal \| heal done: restart --pair", timeline), timeline
    fired = _fired(drill)
    assert "PdctlPairBroken" in fired
    for name in fired:  # every alert Prometheus fired over the drill, read back from its ALERTS
        assert re.search(rf"(page|alert \(\w+\)) firing: {name}", timeline), name
    # in time order (the table is sorted by time): the operator's restart, the page, then the heal
    rows = [r for r in timeline.splitlines() if r.startswith("| ")]
    restart = _row(rows, "action", "pdctl restart --role decode --override-hazard")
    page = _row(rows, "page", "page firing: PdctlPairBroken")
    healed = _row(rows, "heal", "heal started: restart --pair"), _row(rows, "heal", "heal done: restart --pair")
    assert restart < page < healed[0] < healed[1], timeline
    assert drill["page"]["labels"]["severity"] == "critical"
    assert re.search(r"watch verdict \w+ -> fail", timeline) and re.search(r"watch verdict fail -> \w+", timeline)
    cause = md.split("\n## Root cause\n", 1)[1].split("\n## ", 1)[0]
    # said by both watches, evidence once
    assert "degraded bootstrap" in cause and cause.count("lineage hazard degraded-bootstrap") == 1
    ruled = md.split("\n## Ruled out\n", 1)[1].split("\n## ", 1)[0]
    race = ruled.split("**update_status race (rooms pinned)**", 1)[1].split("\n**", 1)[0]
    assert "pinned only briefly" in race or "never read pinned" in race, ruled
    config = md.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert "engine.launch_server" in config and "HF_TOKEN=***" in config
    verify = md.split("\n## Verification after the fix\n", 1)[1].split("\n## ", 1)[0]
    assert "HEALTHY now" in verify and all(f"Layer {x}:" in verify for x in ("health", "e2e", "transfer", "pairs"))
    versions = md.split("\n## Versions\n", 1)[1].split("\n## ", 1)[0]
    assert "| engine | prefill[0]" in versions and "| router | router[0]" in versions
    assert "**operator**: bob-postmortem" in md and "**pdctl**:" in md and "**written**:" in md
    charts = [c for c in doc["written"]["charts"]]
    assert {os.path.basename(c) for c in charts} == {"drill-queues.svg", "drill-failures.svg", "drill-canaries.svg"}
    for c in charts:
        assert f"]({os.path.basename(c)})" in md
    for text in (md, (out.parent / "drill.html").read_text(), *(open(c).read() for c in charts)):
        assert "hf_incidentsecret123" not in text


def test_the_html_renders_offline_with_its_charts_and_sections(written):
    doc, out = written
    page = render(out.parent / "drill.html")
    assert page.fetched == []
    dom = page.dom
    for s in SECTIONS:
        assert re.search(rf"<h2>{re.escape(s)}</h2>", dom), s
    figures = re.findall(r'<figure class="chart" id="chart-(\w+)">(.*?)</figure>', dom, flags=re.S)
    assert [name for name, _ in figures] == ["queues", "failures", "canaries"]
    for _name, body in figures:
        assert "<svg" in body and len(re.findall(r"<path ", body)) > 20  # axes, ticks, text as paths, the lines
        assert "<text" not in body  # text drawn as paths: no font needed
    assert "white-space: pre-wrap" in dom and "bob-postmortem" in dom
    assert "hf_incidentsecret123" not in dom
