"""The shipped Grafana dashboard (pdctl/alerts/pdctl.dashboard.json): its structure, and every panel's query
evaluated by a real Prometheus (tests/fixtures/prometheus.py) with Grafana's variables substituted.

What that Prometheus scrapes is real output, so that a misspelled metric or label in a panel returns nothing and
fails here: pdctl watch's own exporter (pdctl.ops.watch_exporter, on a Watch whose state holds a check, a failed
canary, failures that stand and wait, a hazard, rounds and a heal), and three small servers of this test serving
captured /metrics of the real software (tests/unit/fixtures): SGLang 0.5.23's prefill and decode after requests
(the families a live server has not created yet, the failure and abort counters among them, added from the captures
of its collectors at rest) and smg 1.13's after a degraded bootstrap. Their counters grow at every scrape, so rates
and quantiles are numbers. SGLang's and the router's targets carry the `deployment` label, as docs/alerts.md asks."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pdctl.alerts import DASHBOARD_FILE
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus, prometheus_binary

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "unit" / "fixtures"
DEPLOYMENT = "local"  # the embedded default inventory's name: the watch's exporter labels its metrics with it
#: what Grafana puts in for its variables (a 1 s scrape: a minute holds 60 samples)
VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "${deployment}": DEPLOYMENT,
    "$deployment": DEPLOYMENT,
}
COUNTING = ("counter", "histogram", "summary")
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def dashboard() -> dict:
    return json.loads(DASHBOARD_FILE.read_text())


def panels() -> list[dict]:
    out = []
    for p in dashboard()["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # a collapsed row holds its panels
    return out


def queries() -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every target of every panel."""
    return [(p["title"], t["refId"], t["expr"]) for p in panels() if p["type"] != "row" for t in p["targets"]]


def substitute(expr: str) -> str:
    for var, value in VARIABLES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"a variable the test does not substitute: {expr}"
    return expr


# ---- structure ----------------------------------------------------------------------------------------------------
def test_the_dashboard_is_a_current_grafana_dashboard_with_its_two_variables():
    d = dashboard()
    assert d["schemaVersion"] >= 39 and d["title"] and d["uid"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    dep = variables["deployment"]
    assert dep["type"] == "query" and dep["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert dep["definition"] == dep["query"]["query"] == "label_values(pdctl_watch_info, deployment)"


def test_every_panel_has_a_title_a_place_a_unique_id_and_queries_on_the_variables():
    seen: dict[int, str] = {}
    cells: dict[tuple[int, int], str] = {}
    for p in panels():
        title = p.get("title")
        assert title, p
        assert isinstance(p.get("id"), int) and p["id"] not in seen, f"{title}: id {p.get('id')} also {seen}"
        seen[p["id"]] = title
        pos = p["gridPos"]
        assert {"h", "w", "x", "y"} <= set(pos) and pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, title
        for x in range(pos["x"], pos["x"] + pos["w"]):  # no two panels on one grid cell
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{title} overlaps {cells.get((x, y))}"
                cells[(x, y)] = title
        if p["type"] == "row":
            continue
        assert p["targets"], f"{title}: no query"
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), title
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"] == p["datasource"], title
    titles = " ".join(p["title"] for p in panels())
    for wanted in ("Pair", "Prefill queues", "Decode queues", "KV transfer latency", "Time to first token",
                   "Router 5xx ratio", "KV cache usage", "Checks", "Targets serving", "Heals"):  # fmt: skip
        assert wanted in titles, wanted


def test_every_metric_in_a_query_is_selected_by_the_deployment():
    """pdctl's, SGLang's and the router's metrics alike: a panel never mixes deployments."""
    for title, ref, expr in queries():
        names = re.findall(r"(?:pdctl_|sglang:|smg_)[A-Za-z0-9_:]*", expr)
        assert names, f"{title} {ref}: no pdctl, SGLang or router metric: {expr}"
        for m in re.finditer(r"((?:pdctl_|sglang:|smg_)[A-Za-z0-9_:]*)(\{[^}]*\})?", expr):
            assert m.group(2) and 'deployment="$deployment"' in m.group(2), f"{title} {ref}: {m.group(0)}"


def test_the_dashboard_ships_as_package_data():
    cfg = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^pdctl = \[.*"alerts/\*\.json".*\]$', cfg, re.M)
    assert DASHBOARD_FILE.is_file() and DASHBOARD_FILE.parent.name == "alerts"


# ---- every query in a real Prometheus ------------------------------------------------------------------------------
def _blocks(text: str) -> list[list[str]]:
    """An exposition's families, each its # HELP / # TYPE lines and samples."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# HELP ") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def _names(block: list[str]) -> set[str]:
    names = set()
    for line in block:
        if line.startswith("# "):
            parts = line.split()
            if len(parts) > 2:
                names.add(parts[2])
        else:
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            names.update({name, *(name[: -len(s)] for s in SUFFIXES if name.endswith(s))})
    return names


def exposition(live: str, *at_rest: str) -> str:
    """A live capture, plus the families it has not created yet taken from captures of the collectors at rest."""
    blocks = _blocks(live)
    have = set().union(*(_names(b) for b in blocks))
    for text in at_rest:
        for block in _blocks(text):
            names = _names(block)
            if not names & have:
                blocks.append(block)
                have |= names
    return "\n".join(line for b in blocks for line in b) + "\n"


def grown(text: str, factor: float) -> str:
    """The exposition with every counter, histogram and summary count multiplied by `factor` (gauges as they are)."""
    types = {
        p[2]: p[3] for p in (line.split() for line in text.splitlines() if line.startswith("# TYPE ")) if len(p) > 3
    }
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            kind = types.get(name) or next((types.get(name[: -len(s)]) for s in SUFFIXES if name.endswith(s)), None)
            if kind in COUNTING and not name.endswith("_created"):
                head, value = line.rsplit(" ", 1)
                line = f"{head} {float(value) * factor!r}"
        out.append(line)
    return "\n".join(out) + "\n"


class Exposition(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = grown(self.server.text, 1 + (time.monotonic() - self.server.born) / 5).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(stack: ExitStack, text: str) -> str:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Exposition)
    server.daemon_threads = True
    server.text, server.born = text, time.monotonic()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    stack.callback(thread.join, 5)
    stack.callback(server.server_close)
    stack.callback(server.shutdown)
    return f"127.0.0.1:{server.server_port}"


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def watch_exporter(stack: ExitStack) -> str:
    """pdctl watch's exporter on a Watch of the embedded default whose state has something in every family."""
    from pdctl.checks.result import CheckResult, Status
    from pdctl.inventory import embedded_default
    from pdctl.ops.context import Deployment
    from pdctl.ops.watch import Watch
    from pdctl.ops.watch_exporter import serve_exporter

    dep = stack.enter_context(Deployment(embedded_default()))
    w = Watch(dep)
    st, t = w.state, time.time()
    pre, dec, rtr = (dep.inv.label(role, 0) for role in ("prefill", "decode", "router"))
    health = [CheckResult("health", x, "/health", Status.PASS, "HTTP 200", "HTTP 200") for x in (pre, dec, rtr)]
    st.apply_checks("health", [*health, CheckResult("health", rtr, "/readiness", Status.PASS)], t - 40)
    counters = {"transfer_failed": 0, "bootstrap_failed": 0, "aborted": 0, "generation_tokens": 100}
    st.apply_counters({pre: counters, dec: counters}, t - 30)
    st.apply_counters({pre: {**counters, "transfer_failed": 2}, dec: counters}, t - 20)
    st.apply_pairs([(pre, dec, "fail", 0.012)], t - 10, started=t - 15)  # the 2 failures stand
    st.apply_counters({pre: {**counters, "transfer_failed": 3}, dec: counters}, t - 5)  # 1 awaits a canary
    st.apply_hazards({(pre, dec): "degraded-bootstrap"}, t)
    for cadence in ("health", "inflight", "e2e", "pairs", "flags"):
        st.round_done(cadence, t, 0.1)
    st.heals["done"] = 1
    exporter = serve_exporter(w, "127.0.0.1", 0)
    stack.callback(exporter.close)
    return f"127.0.0.1:{exporter.port}"


@pytest.fixture(scope="module")
def prom():
    prometheus_binary()  # skip (a failure under PDCTL_REQUIRE_ALL) before starting anything
    with ExitStack() as stack:
        prefill = exposition(
            capture("sglang-0.5.23-cpu-pd-prefill-metrics.prom"), capture("sglang-0.5.23-metrics-prefill-idle.prom")
        )
        decode = exposition(
            capture("sglang-0.5.23-cpu-pd-decode-metrics.prom"), capture("sglang-0.5.23-metrics-decode-idle.prom")
        )
        targets = {
            "pdctl-watch": [watch_exporter(stack)],
            "sglang": [serve(stack, prefill), serve(stack, decode)],
            "router": [serve(stack, capture("smg-1.13.0-metrics-after-degraded-bootstrap.prom"))],
        }
        labels = {job: {"deployment": DEPLOYMENT} for job in ("sglang", "router")}
        p = stack.enter_context(Prometheus(targets, rules=[], labels=labels))
        p.wait(
            lambda: (
                len(r := p.query("count_over_time(up[1m])")) == 4
                and all(float(x["value"][1]) >= 5 for x in r)
                and all(float(x["value"][1]) == 1 for x in p.query("up"))
            ),
            60,
            "every target scraped 5 times, each up",
        )
        yield p


def test_the_deployment_variable_lists_the_watched_deployment(prom):
    values = prom._api("label/deployment/values", **{"match[]": "pdctl_watch_info"})
    assert values == [DEPLOYMENT]


def test_every_panel_query_evaluates_to_numbers_on_real_metrics(prom):
    empty, nan = [], []
    for title, ref, expr in queries():
        result = prom.query(substitute(expr))  # an error (a query that does not parse) raises here
        if not result:
            empty.append(f"{title} {ref}: {expr}")
        elif all(math.isnan(float(r["value"][1])) for r in result):
            nan.append(f"{title} {ref}: {expr}")
    assert not empty, "queries with no series (a misspelled metric or label?):\n" + "\n".join(empty)
    assert not nan, "queries with only NaN:\n" + "\n".join(nan)


def test_a_misspelled_metric_in_a_panel_would_be_caught(prom):
    title, _, expr = next(q for q in queries() if "sglang:num_decode_transfer_queue_reqs" in q[2])
    assert prom.query(substitute(expr))
    assert prom.query(substitute(expr.replace("num_decode_transfer_queue_reqs", "num_decode_transfer_queue"))) == []
    assert prom.query(substitute(expr.replace('deployment="$deployment"', 'deployment="other"'))) == []
