"""One page per incident, end to end (issue 27): a real local 1P1D (bundled engine, the default router, free ports)
with the degraded-bootstrap drill armed on its prefill; `pdctl watch` (short cadences); a real Prometheus with the
shipped rules scraping the watch, both engines and the router (those labelled with `deployment`, as
docs/alert-routing.md asks); a real Alertmanager with the shipped configuration (timers shortened, routes and
inhibit rules as shipped) whose pager and ticket webhooks come to the test.

- a killed decode gives exactly one page, PdctlTargetDown naming the decode, and everything resolves after
  `pdctl restart --pair`;
- a degraded bootstrap (the decode restarted alone) gives exactly one page, PdctlPairBroken naming the pair and
  the co-restart, and everything resolves after it;
- a re-deploy of a changed inventory is followed by the running watch (its timeline says so, and that a change
  held the deployment lock) and pages nobody: its flags checks pass against the new launch line.
Each test starts from a healthy deployment with nothing firing (it makes it so if it is not)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.e2e.helpers import FAST_WATCH, REPO, deployed, local_inventory, pdctl
from tests.e2e.test_watch import _scrape, _series, _timeline, _until
from tests.fixtures.alertmanager import Alertmanager, WebhookReceiver
from tests.fixtures.net import free_port
from tests.fixtures.prometheus import Prometheus

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

NAME = "watch-pages"
FAST = {**FAST_WATCH, "pairs_every": 5}


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        NAME,
        ports,
        prefill_env={"PDCTL_DRILLS": "degraded-bootstrap"},
        decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "3"},
        decode_args={"--max-running-requests": 8},  # declared: a watch judging the old inventory sees 6 as drift
    )
    inv["watch"] = FAST
    for d in deployed(tmp_path_factory, NAME, inv):
        yield {**d, "ports": ports}


@pytest.fixture(scope="module")
def paging(dep, tmp_path_factory):
    """The watch, Prometheus and Alertmanager around the deployment, for the whole module."""
    tl, port = tmp_path_factory.mktemp("pages") / "timeline.jsonl", free_port()
    env = dict(os.environ, XDG_STATE_HOME=str(dep["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    argv = [sys.executable, "-m", "pdctl", "watch", "-i", str(dep["inv"]), "--listen", f"127.0.0.1:{port}"]
    watch = subprocess.Popen(
        [*argv, "--timeline", str(tl), "--for", "1800"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    engines = [f"127.0.0.1:{dep['ports'][r]}" for r in ("prefill", "decode")]
    targets = {"pdctl-watch": [f"127.0.0.1:{port}"], "sglang": engines}
    targets["router"] = [f"127.0.0.1:{dep['ports']['prometheus']}"]
    labels = {job: {"deployment": NAME} for job in ("sglang", "router")}
    try:
        with WebhookReceiver() as hook, Alertmanager(hook, group_wait="2s", group_interval="3s") as am:
            with Prometheus(targets, alertmanagers=[am.address], labels=labels) as prom:
                yield {"tl": tl, "port": port, "hook": hook, "prom": prom, "watch": watch}
    finally:
        if watch.poll() is None:
            watch.terminate()
            try:
                watch.wait(20)
            except subprocess.TimeoutExpired:
                watch.kill()


def _cli(dep, *args: str, timeout: float = 400):
    r = pdctl([*args, "-i", str(dep["inv"])], state=dep["state"], timeout=timeout)
    assert r.code == 0, r.output
    return r


def _active(paging) -> list[dict]:
    return [a for a in paging["prom"].alerts() if a["labels"].get("deployment") == NAME]


def _healthy(dep, paging) -> float:
    """A healthy deployment with nothing pending or firing; the instant (monotonic) from which pages count."""
    port = paging["port"]
    ok = lambda: set(_series(_scrape(port), "pdctl_pair_ok").values()) == {1.0}  # noqa: E731
    try:
        _until("the pair canary passing", ok, 60)
    except AssertionError:
        _cli(dep, "restart", "--pair", "--no-verify", "--json")
        _until("the pair canary passing after a co-restart", ok, 90)
    _until("no alert of the deployment pending or firing", lambda: not _active(paging), 240)
    return time.monotonic()


def _pages(paging, since: float) -> list:
    """Notifications to the pager since `since` that bring an alert firing no earlier one brought."""
    seen: set[str] = set()
    out = []
    for n in paging["hook"].received(lambda n: n.receiver == "pager"):
        new = {a["fingerprint"] for a in n.alerts if a["status"] == "firing"} - seen
        seen |= new
        if new and n.t >= since:
            out.append(n)
    return out


def _settled_pages(paging, since: float, quiet_s: float = 20) -> list:
    """The pages once none came for `quiet_s` (several group intervals): a second page would have come by then."""
    last, t = len(_pages(paging, since)), time.monotonic()
    while time.monotonic() - t < quiet_s:
        time.sleep(1)
        now = len(_pages(paging, since))
        if now != last:
            last, t = now, time.monotonic()
    return _pages(paging, since)


def _resolved(paging, since: float) -> None:
    _until("every alert of the deployment resolved", lambda: not _active(paging), 240)
    hook = paging["hook"]
    _until(
        "the page's resolved notification",
        lambda: hook.received(lambda n: n.receiver == "pager" and n.status == "resolved" and n.t >= since),
        60,
    )


def _decode_pid(dep) -> int:
    import json

    text = next(dep["state"].rglob(f"pdctl-{NAME}-decode-0.pid")).read_text()
    return int(json.loads(text)["pid"]) if text.strip().startswith("{") else int(text.split()[0])


def test_a_killed_decode_pages_once_naming_it_and_resolves_after_the_fix(dep, paging):
    since = _healthy(dep, paging)
    os.kill(_decode_pid(dep), signal.SIGKILL)
    paging["hook"].wait(lambda n: n.receiver == "pager" and n.t >= since, 180, "a page for the killed decode")
    pages = _settled_pages(paging, since)
    assert [p.alertnames("firing") for p in pages] == [["PdctlTargetDown"]], [p.brief() for p in pages]
    alert = pages[0].alerts[0]
    decode = f"decode[0]@local:{dep['ports']['decode']}"
    assert alert["labels"]["target"] == decode and alert["labels"]["severity"] == "critical"
    assert "pdctl" in alert["annotations"]["description"]
    fixed = time.monotonic()
    _cli(dep, "restart", "--pair", "--no-verify", "--json")
    _resolved(paging, fixed)


def test_a_degraded_bootstrap_pages_once_naming_the_pair_and_resolves_after_the_co_restart(dep, paging):
    since = _healthy(dep, paging)
    _cli(dep, "restart", "--role", "decode", "--override-hazard", "--no-verify", "--json")
    paging["hook"].wait(lambda n: n.receiver == "pager" and n.t >= since, 240, "a page for the broken pair")
    pages = _settled_pages(paging, since)
    assert [p.alertnames("firing") for p in pages] == [["PdctlPairBroken"]], [p.brief() for p in pages]
    alert = pages[0].alerts[0]
    assert alert["labels"]["prefill"].startswith("prefill[0]@") and alert["labels"]["decode"].startswith("decode[0]@")
    assert "pdctl restart --pair" in alert["annotations"]["description"]
    # the watch's verdicts on the way: a canary asked at once, and never a pin while the pair fails
    lines = [x for x in _timeline(paging["tl"]) if x["t"] >= time.time() - (time.monotonic() - since)]
    assert any(x.get("event") == "canary" for x in lines), lines[-20:]
    inflight = [x for x in lines if x.get("layer") == "inflight"]
    assert not [x for x in inflight if x.get("status") == "fail"], inflight
    fixed = time.monotonic()
    _cli(dep, "restart", "--pair", "--no-verify", "--json")
    _resolved(paging, fixed)
    transfer = _series(_scrape(paging["port"]), "pdctl_kv_failures_unexplained")
    assert transfer and set(transfer.values()) == {0.0}, transfer


def test_a_redeploy_of_a_changed_inventory_is_followed_and_pages_nobody(dep, paging):
    since = _healthy(dep, paging)
    data = yaml.safe_load(dep["inv"].read_text())
    data["roles"]["decode"][0]["args"]["--max-running-requests"] = 6
    dep["inv"].write_text(yaml.safe_dump(data))
    t_wall = time.time()
    _cli(dep, "deploy", "--no-verify", "--json")
    followed = _until(
        "the watch following the new inventory",
        lambda: [x for x in _timeline(paging["tl"]) if x.get("event") == "declared" and x["t"] >= t_wall - 60],
        60,
    )
    assert followed[0]["followed"] is True and "roles.decode[0]" in followed[0]["observed"], followed
    # the deploy held the deployment lock: the watch said so, and its restarts were planned ones
    changes = _until(
        "the deploy's change said started and ended",
        lambda: (
            [x for x in _timeline(paging["tl"]) if x.get("event") == "change" and x["t"] >= t_wall - 1][1:]
            and [x for x in _timeline(paging["tl"]) if x.get("event") == "change" and x["t"] >= t_wall - 1]
        ),
        30,
    )
    assert [x["status"] for x in changes][:2] == ["started", "ended"], changes
    assert "deploy" in changes[0]["observed"], changes
    decode = f"decode[0]@local:{dep['ports']['decode']}"

    def flags_pass_on_the_new_line():
        flags = _series(_scrape(paging["port"]), "pdctl_check_ok", layer="flags", target=decode)
        named = [lab for lab in flags if ("check", "--max-running-requests") in lab]
        return named and set(flags.values()) == {1.0} and flags

    _until("the decode's flags checks passing against the new launch line", flags_pass_on_the_new_line, 60)
    _until("no alert of the deployment pending or firing", lambda: not _active(paging), 180)
    assert _pages(paging, since) == []
