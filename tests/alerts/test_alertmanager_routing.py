"""One incident, one page, through the real thing: Debian's Prometheus with the shipped rules and Debian's
Alertmanager with the shipped routing and inhibition (tests/fixtures/prometheus.py, tests/fixtures/alertmanager.py;
only the Alertmanager timers are shortened), Alertmanager's webhooks going to the test's receiver.

Prometheus scrapes small servers of this test that expose, in Prometheus's text format, what pdctl watch's exporter,
SGLang's prefill and decode and the router (smg) expose, with the names and labels of pdctl/ops/watch_exporter.py
and of captured SGLang 0.5.23 / smg 1.13 output. Each incident is replayed in a deployment of its own, all three in
one Prometheus and Alertmanager started once for the module, so that their `for:` clocks run side by side:
- degraded bootstrap: a decode restarted under a long-running prefill; every symptom rises; the page is
  PdctlPairBroken, naming the pair and `pdctl restart --pair`;
- pin: a room stays in the prefill's inflight queue; the page is PdctlInflightPinned;
- killed decode: its process is killed (its host still answers the watch) or its host is gone too; its scrape target
  refuses; the page is PdctlTargetDown, naming the decode.
In each: exactly one firing page, no ticket while it fires, every other alert of the incident held by Alertmanager as
inhibited; after the fix (a co-restart) the page is held firing for its keep_firing_for, resolves within 2 minutes,
and nothing else fires.

The replay compresses the degraded pair's failed canaries (the watch canaries a failed pair again 5 s later) to
one scrape each. Each inhibit rule on its own, source and target posted straight to a real Alertmanager:
tests/unit/test_alertmanager_config.py."""

from __future__ import annotations

import re
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import pytest
import yaml

from pdctl.alerts import RULES_FILE
from tests.fixtures.alertmanager import Alertmanager, Notification, WebhookReceiver, alertmanager_binary
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus, prometheus_binary

DEGRADED, PIN, KILLED, HOST_GONE = "degraded-bootstrap", "pin", "killed-decode", "decode-host-gone"
DEPLOYMENTS = (DEGRADED, PIN, KILLED, HOST_GONE)
MODEL = "/models/tiny-llama"
XFER, BOOT = "sglang:num_transfer_failed_reqs_total", "sglang:num_bootstrap_failed_reqs_total"
CHAT = "/v1/chat/completions"
# Alertmanager's timers for the test (shipped: 30s, 5m): routes, grouping and inhibition stay as shipped
GROUP_WAIT_S, GROUP_INTERVAL_S = 2, 4
# After the last alert of an incident reached Alertmanager: its group's first flush (group_wait) and the next flush
# of the page's group (group_interval) have both passed within this, so any notification they make has arrived
SETTLED_S = GROUP_WAIT_S + GROUP_INTERVAL_S + 3

# What Prometheus fires for each incident (besides its page), all of it inhibited in Alertmanager
SYMPTOMS = {
    DEGRADED: {
        "PdctlPairCanaryFailing",
        "PdctlKvFailuresRising",
        "PdctlLineageHazard",
        "PdctlCheckFailing",
        "SGLangTransferFailuresRising",
        "RouterErrorRatioHigh",
    },
    PIN: {"SGLangPrefillInflightStalled", "PdctlCheckFailing"},
    KILLED: {
        "PdctlRouterNotReady",
        "PdctlCheckFailing",
        "ScrapeTargetDown",
        "RouterErrorRatioHigh",
    },
}
SYMPTOMS[HOST_GONE] = SYMPTOMS[KILLED]
PAGE = {
    DEGRADED: "PdctlPairBroken",
    PIN: "PdctlInflightPinned",
    KILLED: "PdctlTargetDown",
    HOST_GONE: "PdctlTargetDown",
}


# -- what the servers expose ------------------------------------------------------------------------------------------
class Counter:
    """A counter growing at a rate the replay sets (per second), read at each scrape."""

    def __init__(self, rate: float = 0.0, value: float = 0.0):
        self.value_at, self.t, self.rate = value, time.monotonic(), rate

    def value(self) -> float:
        return self.value_at + self.rate * (time.monotonic() - self.t)

    def set_rate(self, rate: float) -> None:
        self.value_at, self.t, self.rate = self.value(), time.monotonic(), rate


Sample = tuple[dict[str, str], float]


def exposition(families: dict[str, tuple[str, list[Sample]]]) -> str:
    """Prometheus's text format 0.0.4, as prometheus_client writes it."""
    lines = []
    for name, (kind, samples) in families.items():
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{inner}}} {float(value)!r}")
    return "\n".join(lines) + "\n"


class Endpoint:
    """A /metrics server on a free loopback port, rendering at each scrape; stopped, its port refuses."""

    def __init__(self, render: Callable[[], str]):
        self.render = render
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> "Endpoint":
        render = self.render

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # Prometheus killed mid-scrape at teardown
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name=f"metrics-{self.port}", daemon=True).start()
        return self

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Replay:
    """One deployment (a prefill, a decode, a router, and pdctl watch on them) as its /metrics endpoints show it:
    healthy until an incident changes the fields below; every scrape renders the fields of that moment."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.watch = Endpoint(self.watch_metrics)
        self.prefill = Endpoint(lambda: self.sglang_metrics("prefill"))
        self.decode = Endpoint(lambda: self.sglang_metrics("decode"))
        self.router = Endpoint(self.router_metrics)
        # the inventory's instance labels, as the watch names its targets
        self.P = f"prefill[0]@127.0.0.1:{self.prefill.port}"
        self.D = f"decode[0]@127.0.0.1:{self.decode.port}"
        self.R = f"router[0]@127.0.0.1:{self.router.port}"
        # pdctl watch's state
        self.down: set[str] = set()  # targets whose host gives the watch no answer: their checks are unknown
        self.not_serving: set[str] = set()  # targets whose host answers but whose process does not
        self.failing: set[tuple[str, str, str]] = set()  # (layer, target, check)
        self.router_ready = 1
        self.pinned_since: float | None = None
        self.pair_ok: int | None = 1  # None: the last canary was unknown (its series absent)
        self.pair_failures = 0
        self.kv_since_start: dict[tuple[str, str], int] = {}
        self.kv_unexplained: dict[tuple[str, str], int] = {}
        self.hazard: str | None = None
        # SGLang's and the router's
        self.prefill_inflight = 0
        self.transfer_failed: Counter | None = None  # SGLang creates the series at the first failure
        self.generated = Counter()  # tokens decode generated for traffic
        # the watch's canaries (~16 tokens every 30 s) counted by the watch, and by the decode's current process
        self.canary_tokens, self.decode_canary = Counter(16 / 30), Counter(16 / 30)
        self.answers: dict[tuple[str, str], Counter] = {}  # (status_code, error_code) -> chat completions answered
        self.readiness = Counter(0.2)  # the watch's /readiness polls, every 5 s

    def __enter__(self) -> "Replay":
        for e in (self.watch, self.prefill, self.decode, self.router):
            e.start()
        return self

    def __exit__(self, *exc) -> None:
        for e in (self.watch, self.prefill, self.decode, self.router):
            e.stop()

    def serve(self, rps: float) -> None:
        """Healthy traffic: every chat completion answered 200, decode generating."""
        self.answers = {("200", ""): Counter(rps)}
        self.generated.set_rate(20 * rps)

    def canaries(self, tokens_per_s: float) -> None:
        self.canary_tokens.set_rate(tokens_per_s)
        self.decode_canary.set_rate(tokens_per_s)

    def checks(self) -> list[tuple[str, str, str]]:
        P, D, R = self.P, self.D, self.R
        out = [("health", t, "/health") for t in (P, D, R)] + [("health", R, "/readiness")]
        out += [("transfer", t, c) for t in (P, D) for c in (XFER, BOOT)]
        out += [("inflight", "prefill+decode", "inflight"), ("e2e", R, "chat completion")]
        unknown = self.down | ({"prefill+decode"} if (self.down | self.not_serving) & {P, D} else set())
        # a worker that does not serve: its /health fails, its /metrics cannot be read (transfer checks unknown)
        return [c for c in out if c[1] not in unknown and not (c[1] in self.not_serving and c[0] == "transfer")]

    def watch_metrics(self) -> str:
        from pdctl import __version__

        now = time.time()
        with self.lock:
            d = {"deployment": self.name}
            pair = {**d, "prefill": self.P, "decode": self.D}
            checks = [({**d, "layer": layer, "target": t, "check": c}, (layer, t, c)) for layer, t, c in self.checks()]
            targets = (self.P, self.D, self.R)
            kinds = [(t, k) for t in (self.P, self.D) for k in ("transfer", "bootstrap")]
            return exposition(
                {
                    "pdctl_watch_info": ("gauge", [({**d, "version": __version__}, 1)]),
                    "pdctl_check_ok": ("gauge", [(lab, 0 if key in self.failing else 1) for lab, key in checks]),
                    "pdctl_check_warn": ("gauge", [(lab, 0) for lab, _ in checks]),
                    "pdctl_router_ready": ("gauge", [({**d, "target": self.R}, self.router_ready)]),
                    "pdctl_target_up": ("gauge", [({**d, "target": t}, int(t not in self.down)) for t in targets]),
                    "pdctl_target_serving": (
                        "gauge",
                        [({**d, "target": t}, int(t not in self.down | self.not_serving)) for t in targets],
                    ),
                    "pdctl_inflight_pinned": ("gauge", [(d, int(self.pinned_since is not None))]),
                    "pdctl_inflight_pinned_seconds": (
                        "gauge",
                        [(d, 0 if self.pinned_since is None else now - self.pinned_since)],
                    ),
                    "pdctl_inflight_busy": ("gauge", [(d, 0)]),
                    "pdctl_pair_ok": ("gauge", [] if self.pair_ok is None else [(pair, self.pair_ok)]),
                    "pdctl_pair_latency_seconds": ("gauge", [(pair, 0.04)] if self.pair_ok else []),
                    "pdctl_pair_failures_consecutive": ("gauge", [(pair, self.pair_failures)]),
                    "pdctl_kv_failures_since_start": (
                        "gauge",
                        [({**d, "target": t, "kind": k}, self.kv_since_start.get((t, k), 0)) for t, k in kinds],
                    ),
                    "pdctl_kv_failures_unexplained": (
                        "gauge",
                        [({**d, "target": t, "kind": k}, self.kv_unexplained.get((t, k), 0)) for t, k in kinds],
                    ),
                    "pdctl_kv_failures_awaiting_canary": (
                        "gauge",
                        [({**d, "target": t, "kind": k}, 0) for t, k in kinds],
                    ),
                    "pdctl_lineage_hazard": ("gauge", [({**pair, "hazard": self.hazard}, 1)] if self.hazard else []),
                    "pdctl_round_last_timestamp_seconds": (
                        "gauge",
                        [({**d, "cadence": c}, now) for c in ("e2e", "flags", "health", "inflight", "pairs")],
                    ),
                    "pdctl_heals_total": (
                        "counter",
                        [({**d, "outcome": o}, 0) for o in ("done", "dry", "failed", "refused")],
                    ),
                    "pdctl_heal_budget_exhausted": ("gauge", [(d, 0)]),
                    "pdctl_canary_generated_tokens_total": ("counter", [(d, round(self.canary_tokens.value()))]),
                    "pdctl_change_in_progress": ("gauge", [(d, 0)]),
                }
            )

    def sglang_metrics(self, role: str) -> str:
        # label sets of SGLang 0.5.23's scheduler and tokenizer metrics (tests/unit/fixtures/sglang-0.5.23-*.prom)
        sched = {"engine_type": role, "model_name": MODEL, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
        tok = {"engine_type": role, "is_streaming": "false", "model_name": MODEL}
        with self.lock:
            inflight = self.prefill_inflight if role == "prefill" else 0
            failed = self.transfer_failed if role == "prefill" else None
            return exposition(
                {
                    "sglang:num_running_reqs": ("gauge", [(sched, 0)]),
                    "sglang:token_usage": ("gauge", [(sched, 0.12)]),
                    "sglang:num_prefill_inflight_queue_reqs": ("gauge", [(sched, inflight)]),
                    "sglang:num_decode_prealloc_queue_reqs": ("gauge", [(sched, 0)]),
                    "sglang:num_decode_transfer_queue_reqs": ("gauge", [(sched, 0)]),
                    XFER: ("counter", [(sched, round(failed.value()))] if failed else []),
                    "sglang:num_aborted_requests_total": (
                        "counter",
                        [({"engine_type": role, "model_name": MODEL}, 0)],
                    ),
                    "sglang:generation_tokens_total": (
                        "counter",
                        [(tok, round(self.generated.value() + self.decode_canary.value()) if role == "decode" else 0)],
                    ),
                }
            )

    def router_metrics(self) -> str:
        # smg 1.13's answer counter (tests/unit/fixtures/smg-1.13.0-metrics-*.prom)
        with self.lock:
            samples = [
                ({"path": CHAT, "status_code": code, "error_code": err}, round(c.value()))
                for (code, err), c in sorted(self.answers.items())
            ]
            samples.append(
                ({"path": "/readiness", "status_code": "200", "error_code": ""}, round(self.readiness.value()))
            )
            return exposition({"smg_http_responses_total": ("counter", samples)})


# -- the incidents and their fixes ------------------------------------------------------------------------------------
def degraded_bootstrap(r: Replay) -> None:
    """A decode restarted alone under a long-running prefill: the prefill's transfers to it fail silently."""
    with r.lock:
        r.hazard = "degraded-bootstrap"
        r.transfer_failed = Counter(0.5, 1)
        r.kv_since_start[(r.P, "transfer")] = r.kv_unexplained[(r.P, "transfer")] = 3
        r.failing = {("transfer", r.P, XFER), ("e2e", r.R, "chat completion")}
        r.pair_ok, r.pair_failures = 0, 1
        r.canaries(0)  # they fail: no tokens
        r.answers[("500", "prefill_internal_error")] = Counter(0.8)
        r.answers[("200", "")].set_rate(0.2)
        r.generated.set_rate(4)


def pinned(r: Replay) -> None:
    """A room stays in the prefill's inflight queue; no traffic: decode generates only the watch's canaries'
    tokens (its pairs pass)."""
    with r.lock:
        r.prefill_inflight = 1
        r.pinned_since = time.time() - 25  # the watch's verdict comes ~20-25 s after the pin
        r.failing = {("inflight", "prefill+decode", "inflight"), ("e2e", r.R, "chat completion")}


def killed_decode(r: Replay, *, host_gone: bool = False) -> None:
    """The decode's process is killed (its host still answers the watch: pdctl_target_up 1, pdctl_target_serving 0,
    its /health failing), or its host is gone too (pdctl_target_up 0, every check of it unknown); either way its
    /metrics refuses and the router has no pair to route to. Its pair's canaries are unknown, not failed (the watch
    calls a canary through a worker whose /health fails unknown; through a host gone it gets no answer): the
    pair's run of failures stays as it was, and the worker's own alert says it."""
    r.decode.stop()
    with r.lock:
        if host_gone:
            r.down = {r.D}
            r.failing = set()
        else:
            r.not_serving = {r.D}
            r.failing = {("health", r.D, "/health")}
        r.router_ready = 0
        r.failing |= {("health", r.R, "/readiness"), ("e2e", r.R, "chat completion")}
        r.pair_ok = None
        r.answers = {("200", ""): Counter(0, r.answers[("200", "")].value())}
        r.answers[("503", "no_healthy_worker_pair")] = Counter(1.0)
        r.generated.set_rate(0)
        r.canaries(0)


def co_restarted(r: Replay) -> None:
    """`pdctl restart --pair`: prefill, decode and router are new processes (their counters start again), the
    watch's failures of the old processes no longer stand, canaries pass."""
    if not r.decode.running:
        r.decode.start()
    with r.lock:
        r.down, r.not_serving, r.failing, r.router_ready, r.hazard = set(), set(), set(), 1, None
        r.pinned_since, r.prefill_inflight = None, 0
        r.pair_ok, r.pair_failures = 1, 0
        r.kv_unexplained = {}
        r.transfer_failed = None
        r.generated, r.decode_canary = Counter(), Counter()
        r.canaries(16 / 30)  # the watch's own count goes on
        r.readiness = Counter(0.2)
        r.serve(1.0)


# -- the stack ------------------------------------------------------------------------------------------------------
class LabelledPrometheus(Prometheus):
    """The fixture's Prometheus scraped as docs/alert-routing.md asks of users: the watch as job pdctl-watch, each
    SGLang worker and router target labelled with its deployment."""

    def __init__(self, replays: list[Replay], **kw):
        super().__init__({}, **kw)
        self.replays = replays

    def config(self) -> dict:
        cfg = super().config()
        cfg["scrape_configs"] = [
            {"job_name": "pdctl-watch", "static_configs": [{"targets": [r.watch.address for r in self.replays]}]},
            {
                "job_name": "sglang",
                "static_configs": [
                    {"targets": [r.prefill.address, r.decode.address], "labels": {"deployment": r.name}}
                    for r in self.replays
                ],
            },
            {
                "job_name": "router",
                "static_configs": [
                    {"targets": [r.router.address], "labels": {"deployment": r.name}} for r in self.replays
                ],
            },
        ]
        return cfg


@dataclass
class Stack:
    prom: LabelledPrometheus
    am: Alertmanager
    hook: WebhookReceiver
    replays: dict[str, Replay]


def _of(dep: str, receiver: str | None = None) -> Callable[[Notification], bool]:
    return lambda n: n.body["groupLabels"].get("deployment") == dep and receiver in (None, n.receiver)


def _firing(prom: Prometheus, dep: str) -> list[dict]:
    return [a for a in prom.alerts() if a["labels"].get("deployment") == dep and a["state"] == "firing"]


def _set_and_scraped(stack: Stack, r: Replay, failures: int) -> None:
    with r.lock:
        r.pair_failures = failures
    expr = f'pdctl_pair_failures_consecutive{{deployment="{r.name}"}}'
    stack.prom.wait(lambda: stack.prom.value(expr) == failures, 15, f"{expr} == {failures} scraped")


@pytest.fixture(scope="module")
def stack():
    prometheus_binary()  # skip (a failure under PDCTL_REQUIRE_ALL) before starting anything
    alertmanager_binary()
    with ExitStack() as es:
        replays = {name: es.enter_context(Replay(name)) for name in DEPLOYMENTS}
        for name in (DEGRADED, KILLED, HOST_GONE):
            replays[name].serve(1.0)
        hook = es.enter_context(WebhookReceiver())
        am = es.enter_context(Alertmanager(hook, group_wait=f"{GROUP_WAIT_S}s", group_interval=f"{GROUP_INTERVAL_S}s"))
        prom = es.enter_context(LabelledPrometheus(list(replays.values()), alertmanagers=[am.address]))
        s = Stack(prom, am, hook, replays)
        # healthy first: every target scraped twice (rates exist), nothing pending
        prom.wait(
            lambda: len(ups := prom.query("up")) == 4 * len(replays) and all(float(u["value"][1]) == 1 for u in ups),
            30,
            "every target scraped",
        )
        prom.wait(lambda: (prom.value("min(count_over_time(up[1m]))") or 0) >= 3, 30, "three scrapes of each")
        assert prom.alerts() == [], "a healthy replay raised alerts"
        degraded_bootstrap(replays[DEGRADED])
        pinned(replays[PIN])
        killed_decode(replays[KILLED])
        killed_decode(replays[HOST_GONE], host_gone=True)
        for n in (2, 3):  # the degraded pair's canaries keep failing
            _set_and_scraped(s, replays[DEGRADED], n)
        yield s


def _wall(rfc3339: str) -> float:
    """Alertmanager's timestamps (nanoseconds, Z) as unix time."""
    head, _, frac = rfc3339.rstrip("Z").partition(".")
    return datetime.fromisoformat(head).replace(tzinfo=timezone.utc).timestamp() + float(f"0.{frac or 0}")


def _settle_and_judge(s: Stack, dep: str, timeout: float = 200) -> Notification:
    """Wait until Prometheus fires the incident's page and symptoms and Alertmanager holds them, the symptoms
    inhibited, plus SETTLED_S; then judge what the receiver got for `dep`: one firing page, no ticket."""
    page_name = PAGE[dep]
    s.hook.wait(_of(dep, "pager"), timeout, f"{dep}: a page")
    s.prom.wait(
        lambda: {a["labels"]["alertname"] for a in _firing(s.prom, dep)} >= SYMPTOMS[dep] | {page_name},
        timeout,
        f"{dep}: Prometheus firing {sorted(SYMPTOMS[dep] | {page_name})}",
    )

    def held() -> bool:
        am = {frozenset(a["labels"].items()): a for a in s.am.alerts(deployment=dep)}
        return all(frozenset(a["labels"].items()) in am for a in _firing(s.prom, dep))

    s.prom.wait(held, 30, f"{dep}: Alertmanager holding every alert Prometheus fires")
    am_alerts = s.am.alerts(deployment=dep)
    last_fired = max(_wall(a["startsAt"]) for a in am_alerts)  # Prometheus sends an alert as it starts firing
    criticals = {a["fingerprint"] for a in am_alerts if a["labels"]["severity"] == "critical"}
    for a in am_alerts:
        name = a["labels"]["alertname"]
        if name == page_name:
            assert a["status"]["state"] == "active", a
        else:
            assert a["status"]["state"] == "suppressed", f"{dep}: {name} not inhibited: {a['status']}"
            assert set(a["status"]["inhibitedBy"]) <= criticals, a
    # no notification is expected from here: polled until both flushes that could make one have passed
    while time.time() < last_fired + SETTLED_S:
        time.sleep(0.25)
    got = s.hook.received(_of(dep))
    assert [n.receiver for n in got] == ["pager"], "\n".join(n.brief() for n in got)
    page = got[0]
    assert page.status == "firing" and page.alertnames() == [page_name], page.brief()
    return page


def test_degraded_bootstrap_pages_once_pair_broken_naming_the_pair_and_the_restart(stack):
    r = stack.replays[DEGRADED]
    page = _settle_and_judge(stack, DEGRADED)
    alert = page.alerts[0]
    assert alert["labels"]["prefill"] == r.P and alert["labels"]["decode"] == r.D
    assert r.P in alert["annotations"]["summary"] and r.D in alert["annotations"]["summary"]
    assert "`pdctl restart --pair`" in alert["annotations"]["description"]


def test_pin_pages_once_inflight_pinned(stack):
    page = _settle_and_judge(stack, PIN)
    alert = page.alerts[0]
    assert alert["labels"]["deployment"] == PIN
    assert "`pdctl restart --pair`" in alert["annotations"]["description"]


@pytest.mark.parametrize("dep", [KILLED, HOST_GONE])
def test_killed_decode_pages_once_target_down_naming_the_decode(stack, dep):
    r = stack.replays[dep]
    page = _settle_and_judge(stack, dep)
    alert = page.alerts[0]
    assert alert["labels"]["target"] == r.D
    assert r.D in alert["annotations"]["summary"]


def _keep_firing_s(alert: str) -> float:
    """The rule's keep_firing_for in seconds (a page may be held firing after the fix, so that its inhibition lasts
    while its symptoms drain)."""
    doc = yaml.safe_load(RULES_FILE.read_text())
    rule = next(r for g in doc["groups"] for r in g["rules"] if r.get("alert") == alert)
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d)", str(rule.get("keep_firing_for", "0s"))))


# docs/alerts.md: every alert resolves within 2 minutes of the fix (the pages are held keep_firing_for after it)
RESOLVED_WITHIN_S = 120


def test_after_the_co_restart_every_page_resolves_and_nothing_new_fires(stack):
    fixed_at = time.monotonic()
    for r in stack.replays.values():
        co_restarted(r)
    last = 0.0
    for dep in DEPLOYMENTS:
        held_s = _keep_firing_s(PAGE[dep])
        assert held_s + 15 <= RESOLVED_WITHIN_S, f"{PAGE[dep]}: keep_firing_for {held_s:g}s leaves no time to resolve"
        resolved = stack.hook.wait(
            lambda n: _of(dep, "pager")(n) and PAGE[dep] in n.alertnames("resolved"),
            max(fixed_at + RESOLVED_WITHIN_S - time.monotonic(), 0),
            f"{dep}: the page resolved within {RESOLVED_WITHIN_S} s of the co-restart",
        )
        # held firing (its inhibition with it) for keep_firing_for after its condition cleared, which is after the fix
        took = resolved[0].t - fixed_at
        assert took >= held_s - 1, f"{dep}: {PAGE[dep]} resolved {took:.1f} s after the fix, not held {held_s:g} s"
        last = max(last, resolved[0].t)
    while time.monotonic() < last + SETTLED_S:  # as in _settle_and_judge: both flushes after it have passed
        time.sleep(0.25)
    # a symptom that outlives its root alert would page (or ticket) now, after the fix
    fired = [n for n in stack.hook.received(lambda n: n.t > fixed_at) if n.alertnames("firing")]
    assert not fired, "\n".join(
        f"{n.receiver} {n.body['groupLabels']}: firing {n.alertnames('firing')} after the fix" for n in fired
    )


def test_every_notification_names_its_deployment_and_every_rule_evaluated(stack):
    stray = stack.hook.received(lambda n: n.body["groupLabels"].get("deployment") not in DEPLOYMENTS)
    assert not stray, "\n".join(n.brief() for n in stray)
    bad = [(r["name"], r.get("lastError")) for r in stack.prom.rule_list() if r.get("health") == "err"]
    assert not bad, bad
