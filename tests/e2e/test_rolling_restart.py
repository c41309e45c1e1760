"""`pdctl restart --rolling` against a real local 2x2 deployment (bundled engine, the real smg on free ports, and once
behind sglang-router 0.3.2, whose worker API replaces a re-added worker where smg answers 409): under a checked client
load of 2 requests/s through the router, every prefill and decode is restarted with no failed client request; a router
that would be left without a decode refuses it before anything stops; a worker that does not drain stops it at that
unit, and the untouched worker is put back into the router; a decode restarted alone, or dead, goes first. Last
(issue 28), on the same deployment: a run killed or interrupted part-way leaves workers out of the router, which
status's router membership names with exit 1 and the interrupt message names precisely; a dead or hung router on
this live host is a failure (exit 1), not "unknown"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.request

import pytest

from tests.e2e.helpers import REPO, deployed, pdctl
from tests.e2e.test_verify_pairs import xpyd_inventory
from tests.fixtures.client_load import ClientLoad

pytestmark = [pytest.mark.e2e, pytest.mark.engine]


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    yield from deployed(tmp_path_factory, "rolling", xpyd_inventory("rolling"))


def run(dep, *args: str, timeout: float = 300):
    return pdctl([*args, "-i", str(dep["inv"])], state=dep["state"], timeout=timeout)


def router_url(dep) -> str:
    return f"http://127.0.0.1:{dep['data']['roles']['router'][0]['port']}"


def router_workers(dep) -> list[dict]:
    with urllib.request.urlopen(router_url(dep) + "/workers", timeout=5) as r:
        return json.loads(r.read())["workers"]


def worker_api(dep, method: str, path: str, body: dict | None = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(router_url(dep) + path, data, {"Content-Type": "application/json"}, method=method)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status


def pids(dep) -> dict[str, int]:
    r = run(dep, "status", "--json", timeout=60)
    assert r.code in (0, 1) and r.json()["roles"], r.output  # 1: a worker a test took out of the router
    return {row["label"]: row["pid"] for row in r.json()["roles"]}


def wait_listed(dep, n: int) -> None:
    from pdctl.poll import poll_until

    w = poll_until(lambda: router_workers(dep), lambda ws: len(ws) == n, timeout=30, interval=0.2)
    assert w.ok, w.value


def test_rolling_restart_keeps_every_client_request_answered(dep):
    before = pids(dep)
    with ClientLoad(router_url(dep), rate=2.0) as load:
        r = run(dep, "restart", "--rolling", "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert doc["ok"] and doc["rolling"] and doc["stopped"] is None
    assert [u["state"] for u in doc["units"]] == ["done", "done"]
    assert [u["decodes"] for u in doc["units"]] == [["decode[0]"], ["decode[1]"]]
    summary = load.summary()
    assert summary["sent"] >= 20 and summary["failed"] == [], summary
    after = pids(dep)
    workers = [label for label in before if not label.startswith("router")]
    assert all(after[w] != before[w] for w in workers), (before, after)  # every prefill and decode restarted
    router = next(label for label in before if label.startswith("router"))
    assert after[router] == before[router]  # the router served throughout
    listed = router_workers(dep)
    assert len(listed) == 4 and all(w["is_healthy"] for w in listed)
    # the order inside a unit: a decode out first, every prefill rolled, then the decode restarted and put back
    steps = [s["step"] for s in doc["steps"] if s["step"].startswith("unit 1:")]
    d0 = next(label for label in workers if label.startswith("decode[0]"))
    assert steps[0] == f"unit 1: {d0} out of the routers"
    assert steps.index(f"unit 1: restart {d0}") > max(i for i, s in enumerate(steps) if "restart prefill" in s)
    assert steps[-1] == f"unit 1: {d0} back in the routers"
    fh = doc["final_health"]
    assert fh["ok"], fh
    lineage = [c for c in fh["layers"]["lineage"] if c["target"].startswith("decode")]
    assert len(lineage) == 2 and {c["status"] for c in lineage} == {"pass"}  # the new co-restart record


@pytest.fixture(scope="module")
def dep_sglang_router(tmp_path_factory):
    inv = xpyd_inventory("rolling-sr")
    inv["roles"]["router"][0]["kind"] = "sglang-router"
    yield from deployed(tmp_path_factory, "rolling-sr", inv)


def test_rolling_restart_behind_sglang_router_keeps_every_client_request_answered(dep_sglang_router):
    dep = dep_sglang_router
    before = pids(dep)
    with ClientLoad(router_url(dep), rate=2.0) as load:
        r = run(dep, "restart", "--rolling", "--json")
    assert r.code == 0, r.output
    assert [u["state"] for u in r.json()["units"]] == ["done", "done"]
    summary = load.summary()
    assert summary["sent"] >= 20 and summary["failed"] == [], summary
    after = pids(dep)
    assert all(after[w] != before[w] for w in before if not w.startswith("router")), (before, after)
    assert len(router_workers(dep)) == 4 and r.json()["final_health"]["ok"]


def test_pairs_the_watch_saw_fail_their_canaries_go_first(dep):
    """A pair broken for a reason the lineage cannot see (the lineage is clean after the last test): the watch's
    heal passes the pairs whose canaries failed, and the rolling restart takes their workers first."""
    code = textwrap.dedent(f"""
        import json
        from pdctl.inventory import load_inventory
        from pdctl.ops.context import Deployment
        from pdctl.ops.rolling import rolling_restart
        with Deployment(load_inventory({str(dep["inv"])!r})) as d:
            r = rolling_restart(d, dry_run=True, broken_pairs=[(1, 0)])
        units = [[list(u.unit.prefills), list(u.unit.decodes)] for u in r.units]
        print(json.dumps({{"order": r.order, "units": units}}))
    """)
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_STATE_HOME": str(dep["state"])},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout.splitlines()[-1])
    ports = {role: [w["port"] for w in dep["data"]["roles"][role]] for role in ("prefill", "decode")}
    p1, d0 = f"prefill[1]@local:{ports['prefill'][1]}", f"decode[0]@local:{ports['decode'][0]}"
    assert doc["order"].endswith(f"failed their pair canaries: {p1} -> {d0}"), doc["order"]
    assert "restart lineage" not in doc["order"], doc["order"]  # the lineage alone would keep index order
    assert doc["units"][0][1] == [0], doc["units"]  # decode[0] is the one out in unit 1
    assert doc["units"][0][0] == [1, 0], doc["units"]  # and prefill[1] rolls first


def test_a_pair_the_operator_names_goes_first(dep):
    """`pdctl verify pairs` failed prefill[1] -> decode[1]: `restart --rolling --first-pair` with the pair as the
    screen names it restarts that pair's workers first, and says so; a pair the inventory does not have is exit 2."""
    r = run(dep, "restart", "--rolling", "--dry-run", "--json", "--first-pair", "prefill[1] -> decode[1]")
    assert r.code == 0, r.output
    doc = r.json()
    ports = {role: [w["port"] for w in dep["data"]["roles"][role]] for role in ("prefill", "decode")}
    p1, d1 = f"prefill[1]@local:{ports['prefill'][1]}", f"decode[1]@local:{ports['decode'][1]}"
    assert doc["order"].endswith(f"named by --first-pair: {p1} -> {d1}"), doc["order"]
    assert [u["decodes"] for u in doc["units"]] == [["decode[1]"], ["decode[0]"]], doc["units"]  # not index order
    assert doc["units"][0]["prefills"] == ["prefill[1]", "prefill[0]"], doc["units"]
    bad = run(dep, "restart", "--rolling", "--dry-run", "--first-pair", "5:0")
    assert bad.code == 2 and "--first-pair 5:0: the inventory has prefill[0..1] and decode[0..1]" in bad.stderr, (
        bad.output
    )


def test_refused_when_a_router_would_be_left_without_a_decode(dep):
    """Both decodes out of the router (as a stopped run or an operator can leave it): whichever goes first, the
    router has no decode meanwhile. One decode out is not refused: it goes first (see the dead-decode test)."""
    listed = router_workers(dep)
    decodes = [w for w in listed if w["worker_type"] == "decode"]
    assert len(decodes) == 2, listed
    for w in decodes:
        assert worker_api(dep, "DELETE", f"/workers/{w['id']}") == 202
    try:
        wait_listed(dep, 2)
        before = pids(dep)
        r = run(dep, "restart", "--rolling", "--json")
        assert r.code == 4, r.output
        doc = r.json()
        err = doc["error"]["message"]
        assert "no decode" in err and "router[0]" in err and "no healthy decode" in err, err
        assert pids(dep) == before  # nothing was stopped
    finally:
        for w in decodes:
            worker_api(dep, "POST", "/workers", {"url": w["url"], "worker_type": "decode"})
        wait_listed(dep, 4)


def test_a_worker_that_does_not_drain_stops_the_unit_and_goes_back(dep):
    from pdctl.checks.pairs import canary_body, fresh_room

    p, d = dep["data"]["roles"]["prefill"][0], dep["data"]["roles"]["decode"][0]
    # a long request straight to prefill[0] + decode[0] keeps decode[0] busy well past smg's ~5 s of draining it
    body = json.dumps(
        canary_body(
            prompt="hold",
            max_tokens=20000,
            bootstrap_host="127.0.0.1",
            bootstrap_port=p["bootstrap_port"],
            room=fresh_room(),
            model="pdctl-tiny",
        )
    ).encode()
    threads = [
        threading.Thread(target=_post, args=(f"http://127.0.0.1:{port}/generate", body), daemon=True)
        for port in (p["port"], d["port"])
    ]
    for t in threads:
        t.start()
    before = pids(dep)
    r = run(dep, "restart", "--rolling", "--drain-timeout", "0.5", "--json")
    for t in threads:
        t.join(60)
    assert r.code == 1, r.output
    doc = r.json()
    assert not doc["ok"] and "still has requests" in doc["stopped"] and "--drain-timeout" in doc["stopped"]
    assert doc["units"][0]["state"].startswith("failed at: unit 1:") and "drained" in doc["units"][0]["state"]
    assert doc["units"][0]["out_of_routers"] == [] and doc["units"][0]["workers"]["decode[0]"] == "put back"
    d0 = f"decode[0]@local:{d['port']}"
    assert f"  taken out, never restarted, put back: {d0}" in doc["left"], doc["left"]
    assert doc["left"][-1].startswith("nothing is out of the routers"), doc["left"]
    assert doc["units"][1]["state"] == "not started"
    assert pids(dep) == before  # nothing was restarted
    assert len(router_workers(dep)) == 4  # decode[0] is back in the router


def test_a_decode_restarted_alone_goes_out_first(dep):
    """decode[1] restarted behind pdctl's back (as systemd's Restart= would): the restart lineage calls both its
    pairs broken, so unit 1 takes decode[1] out and decode[0], the sound one, serves meanwhile. It leaves decode[1]
    restarted alone (the next test heals it)."""
    code = textwrap.dedent(f"""
        from pdctl.inventory import load_inventory
        from pdctl.ops.context import Deployment
        from pdctl.ops.readiness import wait_ready
        inv = load_inventory({str(dep["inv"])!r})
        with Deployment(inv) as d:
            d.services(d.instance("decode", 1).host).restart(inv.service_name("decode", 1), grace=20)
            wait_ready(d, "decode", 1)
    """)
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_STATE_HOME": str(dep["state"])},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    r = run(dep, "restart", "--rolling", "--dry-run", "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert [u["decodes"] for u in doc["units"]] == [["decode[1]"], ["decode[0]"]], doc
    d1 = f"decode[1]@local:{dep['data']['roles']['decode'][1]['port']}"
    assert doc["plan"][0] == f"unit 1: {d1}: out of the routers, drain", doc["plan"]
    assert "restart lineage calls broken" in doc["order"] and f"-> {d1} (degraded-bootstrap)" in doc["order"]
    screen = run(dep, "restart", "--rolling", "--dry-run")
    assert screen.code == 0 and "order: these go first" in screen.stdout


def test_a_dead_decode_is_restarted_first_with_no_failed_client_request(dep):
    """decode[1] killed (the router calls it unhealthy): in index order unit 1 took decode[0], the only live one,
    out of the router, and every client request failed meanwhile. decode[1] now goes first and comes back; the
    load through the router sees no failure. After the previous test (decode[1] was restarted alone)."""
    import os
    import signal

    from pdctl.poll import poll_until

    d1_port = dep["data"]["roles"]["decode"][1]["port"]
    d1 = next(label for label in pids(dep) if label.startswith("decode[1]"))
    os.kill(pids(dep)[d1], signal.SIGKILL)  # a process of this module's own deployment
    unhealthy = poll_until(
        lambda: router_workers(dep),
        lambda ws: any(w["url"].endswith(f":{d1_port}") and w["is_healthy"] is False for w in ws),
        timeout=60,
        interval=0.5,
    )
    assert unhealthy.ok, unhealthy.value
    with ClientLoad(router_url(dep), rate=2.0) as load:
        r = run(dep, "restart", "--rolling", "--json")
    assert r.code == 0, r.output
    doc = r.json()
    assert [u["decodes"] for u in doc["units"]] == [["decode[1]"], ["decode[0]"]], doc["units"]
    assert "not routed to now" in doc["order"] and d1 in doc["order"]
    summary = load.summary()
    assert summary["sent"] >= 20 and summary["failed"] == [], summary
    assert all(w["is_healthy"] for w in router_workers(dep)) and len(router_workers(dep)) == 4


def _library(dep, code: str) -> dict:
    """Run `code` (which prints one JSON document last) against the module's deployment in a fresh interpreter."""
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_STATE_HOME": str(dep["state"])},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def membership(dep) -> dict:
    """What `pdctl status` judges of router membership (ops.router_membership on ops.lifecycle.status's rows): each
    worker's `routed`, the exit code, the headline and the lines under the table."""
    return _library(
        dep,
        f"""
        import json
        from pdctl.checks.role_status import status_exit_code
        from pdctl.inventory import load_inventory
        from pdctl.ops.context import Deployment
        from pdctl.ops.lifecycle import status
        from pdctl.ops.router_membership import with_router_membership
        from pdctl.render.status import routing_lines, status_headline
        with Deployment(load_inventory({str(dep["inv"])!r})) as d:
            rows = with_router_membership(d, status(d))
        print(json.dumps({{
            "routed": {{r.label.split("@")[0]: r.routed for r in rows if r.role != "router"}},
            "exit": int(status_exit_code(rows)),
            "headline": status_headline(rows).plain,
            "lines": routing_lines(rows),
        }}))
        """,
    )


def _rolling_until(dep, sig: int, phase) -> tuple[int, str, str]:
    """`pdctl restart --rolling --json`, sent `sig` as soon as `phase()` holds (polled), its (exit, stdout, stderr)."""
    from pdctl.poll import poll_until

    env = {**os.environ, "XDG_STATE_HOME": str(dep["state"]), "COLUMNS": "200", "PDCTL_OPERATOR": "test-operator"}
    argv = [sys.executable, "-m", "pdctl", "restart", "--rolling", "--json", "--no-verify", "-i", str(dep["inv"])]
    p = subprocess.Popen(argv, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        w = poll_until(lambda: p.poll() is None and phase(), bool, timeout=120, interval=0.05)
        assert w.ok and p.poll() is None, "the phase never came while the restart ran"
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


def _not_routed(dep, role: str, k: int) -> bool:
    port = dep["data"]["roles"][role][k]["port"]
    entry = next((w for w in router_workers(dep) if w["url"].endswith(f":{port}")), None)
    return entry is None or entry.get("status", "ready") != "ready" or entry["is_healthy"] is False


def _down(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
    except OSError:
        return True
    return False


def test_a_killed_rolling_restart_leaves_a_decode_out_and_status_says_so(dep):
    """W7: kill -9 while decode[0] is being taken out of the router: every service runs, the router no longer
    routes to decode[0]. Before, status said "5 of 5 running" and exited 0."""
    code, _out, _err = _rolling_until(dep, signal.SIGKILL, lambda: _not_routed(dep, "decode", 0))
    assert code == -signal.SIGKILL
    wait_listed(dep, 3)  # smg drains it away within seconds of the DELETE
    seen = membership(dep)
    assert seen["routed"] == {"prefill[0]": True, "prefill[1]": True, "decode[0]": False, "decode[1]": True}, seen
    assert seen["exit"] == 1 and seen["headline"] == "status: 5 of 5 running; not routed to: decode[0]", seen
    assert "does not route to decode[0] (not in its worker list)" in seen["lines"][0], seen
    assert seen["lines"][-1].startswith("next: `pdctl restart --rolling` restarts these workers first"), seen
    st = run(dep, "status", "--json", timeout=60)  # the command says what the library judged
    routed = [r.get("routing", {}).get("routed") for r in st.json()["roles"]]
    assert st.code == 1 and routed == [True, True, False, True, None], st.output
    screen = run(dep, "status", timeout=60)
    assert screen.code == 1 and "status: 5 of 5 running; not routed to: decode[0]" in screen.stdout, screen.output


def test_a_sigterm_mid_restart_says_what_each_worker_was_left_as(dep):
    """C1, after the previous test: the next run takes decode[0] (out) first; SIGTERM once prefill[0]'s old process
    is stopped. The message names prefill[0] as a restart begun (before: "restarted, not put back" whatever the
    moment), decode[0] put back (never restarted), prefill[1] and decode[1] untouched; status does not say all is
    well (prefill[0] stopped, or running and not routed to)."""
    p0 = dep["data"]["roles"]["prefill"][0]["port"]
    code, out, _err = _rolling_until(dep, signal.SIGTERM, lambda: _down(p0))
    assert code == 130
    doc = json.loads(out)
    message = doc["error"]["message"]
    assert doc["error"]["kind"] == "interrupted" and "interrupted by SIGTERM" in message, doc
    left = message.split("the rolling restart left each worker as follows:\n", 1)[1].splitlines()
    ports = {
        f"{role}[{k}]": w["port"] for role in ("prefill", "decode") for k, w in enumerate(dep["data"]["roles"][role])
    }
    named = {name: f"{name}@local:{port}" for name, port in ports.items()}
    assert left[0] == f"  restart begun, not finished (stopped, or not ready: see its state): {named['prefill[0]']}"
    assert left[1] == f"  taken out, never restarted, put back: {named['decode[0]']}", left
    assert left[2] == f"  untouched: {named['prefill[1]']}, {named['decode[1]']}", left
    assert left[3].startswith(f"still out of the routers: {named['prefill[0]']}; `pdctl restart --rolling` again")
    assert "restarted, not put back" not in message
    records = run(dep, "history", "--json", timeout=60).json()["records"]
    unit1 = [r for r in records if r["action"] == "restart --rolling"][-1]["units"][0]  # the audit record says it too
    assert unit1["detail"] == f"interrupted during: unit 1: restart {named['prefill[0]']}", unit1
    assert unit1["workers"] == {"prefill[0]": "restarting", "prefill[1]": "untouched", "decode[0]": "put back"}
    seen = membership(dep)  # prefill[0]: stopped (the signal landed before its start) or running, unrouted
    assert seen["routed"] == {"prefill[0]": None if "stopped" in seen["headline"] else False} | {
        "prefill[1]": True,
        "decode[0]": True,
        "decode[1]": True,
    }, seen
    assert seen["exit"] == 1 and seen["headline"] != "status: 5 of 5 running", seen


def test_a_hung_or_dead_router_on_this_live_host_is_a_failure_not_unknown(dep):
    """W13 (last: it kills the router): SIGSTOPped (its worker API hangs) and then killed, the router's host (this
    one) answers: `restart --rolling` exits 1 naming it, not 3 "unknown"."""
    pid = next(pid for label, pid in pids(dep).items() if label.startswith("router"))
    os.kill(pid, signal.SIGSTOP)  # the router of this module's own deployment
    try:
        hung = run(dep, "restart", "--rolling", "--dry-run", "--json")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert hung.code == 1 and hung.json()["error"]["kind"] == "failed", hung.output
    assert "runs but does not answer its worker API: GET /workers: no response within" in hung.output, hung.output
    os.kill(pid, signal.SIGKILL)
    dead = run(dep, "restart", "--rolling", "--json")
    assert dead.code == 1 and dead.json()["error"]["kind"] == "failed", dead.output
    err = dead.json()["error"]
    assert "is not running" in err["message"] and "connection refused" in err["message"], err
    assert "pdctl deploy" in err["hint"], err


def _post(url: str, body: bytes) -> None:
    try:
        urllib.request.urlopen(
            urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=60
        ).read()
    except Exception:
        pass  # the outcome of the hold request is not what is tested
