"""`pdctl watch` against a real local 1P1D of the bundled engine behind the real sglang-router (free ports): its
exporter scraped with real HTTP GETs while it runs; the decode killed by its pid (health goes 0, the timeline says
so), then co-restarted (`pdctl restart --pair`): it recovers, the counter reset is seen as a restart and the
failures since start do not jump; SIGTERM stops it with 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.e2e.helpers import deployed as deploy_and_down
from tests.fixtures.net import closed_port, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

FAST = {
    "health_every": 1,
    "inflight_interval": 1,
    "inflight_window": 4,
    "e2e_every": 5,
    "pairs_every": 3,
    "flags_every": 5,
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("watch-e2e", ports)
    inv["watch"] = FAST
    for dep in deploy_and_down(tmp_path_factory, "watch", inv):
        yield dict(dep, ports=ports)


def _scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """/metrics as (name, labels) -> value, parsed with prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _series(m, name: str, **labels) -> dict[frozenset, float]:
    return {lab: v for (n, lab), v in m.items() if n == name and set(labels.items()) <= set(lab)}


def _until(what: str, fn, limit: float):
    """fn() until it returns a truthy value, within `limit` seconds (polled every 0.5 s)."""
    deadline = time.monotonic() + limit
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except OSError as e:  # the exporter not up yet
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {limit:g}s (last: {last!r})")


def _timeline(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_watch_exporter_sees_a_decode_die_and_recover(deployed, tmp_path):
    port, tl = free_port(), tmp_path / "timeline.jsonl"
    decode = f"decode[0]@local:{deployed['ports']['decode']}"
    env = dict(os.environ, XDG_STATE_HOME=str(deployed["state"]), COLUMNS="80", PDCTL_OPERATOR="test-operator")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "watch",
            "-i",
            str(deployed["inv"]),
            "--listen",
            f"127.0.0.1:{port}",
            "--timeline",
            str(tl),
            "--for",
            "150",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def healthy():
            m = _scrape(port)
            health = _series(m, "pdctl_check_ok", layer="health", check="/health")
            pairs = _series(m, "pdctl_pair_ok")
            return m if len(health) == 3 and set(health.values()) == {1.0} and pairs else None

        m1 = _until("every /health check ok and a pair canary", healthy, 40)
        assert set(_series(m1, "pdctl_pair_ok").values()) == {1.0}
        assert _series(m1, "pdctl_watch_info", deployment="watch-e2e")
        assert set(_series(m1, "pdctl_target_up").values()) == {1.0}
        t1 = _series(m1, "pdctl_round_last_timestamp_seconds", cadence="health")
        _until(
            "the health round's timestamp advancing",
            lambda: (
                (t2 := _series(_scrape(port), "pdctl_round_last_timestamp_seconds", cadence="health"))
                and max(t2.values()) > max(t1.values())
            ),
            10,
        )
        before = _series(_scrape(port), "pdctl_kv_failures_since_start", target=decode)
        assert {dict(k)["kind"] for k in before} == {"transfer", "bootstrap"}

        pidfile = next(deployed["state"].rglob("pdctl-watch-e2e-decode-0.pid"))
        text = pidfile.read_text()
        pid = int(json.loads(text)["pid"]) if text.strip().startswith("{") else int(text.split()[0])
        os.kill(pid, signal.SIGKILL)

        down = _until(
            "decode's /health check going 0",
            lambda: (
                (s := _series(_scrape(port), "pdctl_check_ok", layer="health", target=decode))
                and 0.0 in s.values()
                and s
            ),
            20,
        )
        assert down
        _until(
            "the timeline saying decode's /health failed",
            lambda: [
                x
                for x in _timeline(tl)
                if x.get("target") == decode and x.get("layer") == "health" and x.get("status") == "fail"
            ],
            10,
        )

        r = pdctl(["restart", "--pair", "-i", str(deployed["inv"]), "--json"], state=deployed["state"], timeout=300)
        assert r.code == 0, r.output
        _until(
            "decode's /health check back at 1",
            lambda: set(_series(_scrape(port), "pdctl_check_ok", layer="health", target=decode).values()) == {1.0},
            30,
        )
        after = _until(
            "decode's failure counters read again",
            lambda: _series(_scrape(port), "pdctl_kv_failures_since_start", target=decode),
            10,
        )
        for key, value in before.items():
            # the new process's counters start at 0: the totals since start carry on, never drop, never jump
            assert after[key] == value, (key, before, after)
        lines = _timeline(tl)
        assert any(x.get("event") == "restart" and x.get("target") == decode for x in lines), lines[-20:]
        assert any(
            x.get("target") == decode
            and x.get("layer") == "health"
            and x.get("status") == "pass"
            and x["t"] > min(y["t"] for y in lines if y.get("status") == "fail")
            for x in lines
        )
        assert any(x.get("event") == "round" and x.get("cadence") == "pairs" for x in lines)

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 130, (out, err)
        assert "stopped by SIGTERM" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_host_that_does_not_answer_is_unknown_and_the_rest_are_watched(tmp_path):
    """decode on an SSH host whose port nothing listens on (a real connection attempt, refused): its targets are
    unknown, never failed; the local roles (not deployed) are still checked and fail, so the watch exits 1 as
    final-health would (a failure seen outranks what could not be looked at)."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory("watch-gone", ports)
    inv["hosts"]["gone"] = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": free_port(),
        "connect_timeout": 2,
        "http": "tunnel",
        "accept_new_host_key": True,
    }
    inv["hosts"]["local"]["internal_address"] = "127.0.0.1"
    inv["roles"]["decode"][0].update(host="gone", listen_host="0.0.0.0")
    inv["roles"]["prefill"][0]["listen_host"] = "0.0.0.0"
    inv["watch"] = {"inflight_window": 2}
    path = write_inventory(tmp_path / "inv.yaml", inv)
    r = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--once", "--json"],
        state=tmp_path,
        timeout=60,
    )
    assert r.code == 1, r.output
    doc = r.json()
    decode = f"decode[0]@gone:{ports['decode']}"
    assert decode in doc["unknown_targets"] and doc["targets_up"][decode] is False
    assert not any(c["target"] in (decode, "prefill+decode") and c["status"] == "fail" for c in doc["checks"])
    assert "prefill+decode" in doc["unknown_targets"]
    local = {c["target"] for c in doc["checks"] if c["layer"] == "health"}
    assert local == {f"prefill[0]@local:{ports['prefill']}", f"router[0]@local:{ports['router']}"}
    assert {c["status"] for c in doc["checks"] if c["layer"] == "health"} == {"fail"}  # not deployed: refused
    r80 = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--once"],
        state=tmp_path,
        env={"COLUMNS": "80"},
        timeout=60,
    )
    assert r80.code == 1
    lines = r80.stdout.splitlines()
    # decode, its pair, and the inflight check (a sample without the decode is no finding)
    assert lines[0].startswith("watch watch-gone: FAIL") and "3 unknown" in lines[0], r80.stdout
    screen = " ".join(r80.stdout.split())  # the reason is wrapped at 80 columns
    assert f"unknown {decode}: " in screen and "gone" in screen.split(f"unknown {decode}: ")[1], r80.stdout
    assert doc["unknown_why"][decode] and "gone" in doc["unknown_why"][decode], doc["unknown_why"]
    assert all(len(line) <= 80 for line in lines), r80.stdout


def test_a_watch_too_short_for_its_inflight_window_says_so_before_it_starts(tmp_path):
    """`watch --for 20` with the default 20 s window ended WARN (inconclusive inflight) on a healthy deployment with
    no word why. Now it says up front what --for would give a verdict; long enough, it says nothing."""
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    path = write_inventory(tmp_path / "inv.yaml", local_inventory("watch-short", ports))  # nothing deployed
    r = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--for", "2", "--json"],
        state=tmp_path,
        timeout=60,
    )
    assert r.code == 1, r.output  # nothing answers (inflight unknown, health fails); the warning changes no verdict
    (said,) = r.json()["warnings"]
    assert said.startswith("--for 2: the inflight window (20s") and "give --for 22 or more" in said, said
    assert "warning: --for 2: the inflight window" in " ".join(r.stderr.split())
    data = local_inventory("watch-short", ports)
    data["watch"] = {"inflight_window": 1, "inflight_interval": 0.5}
    path = write_inventory(tmp_path / "inv.yaml", data)
    r = pdctl(
        ["watch", "-i", str(path), "--listen", f"127.0.0.1:{free_port()}", "--for", "2", "--json"],
        state=tmp_path,
        timeout=60,
    )
    assert r.code == 1 and "warnings" not in r.json() and "warning:" not in r.stderr, r.output


def test_a_key_file_missing_ends_the_watch_with_a_usage_error(tmp_path):
    """A configuration no round can get past (the host's SSH key file does not exist) ends the watch at once with
    exit 2 naming the file, --once included (it used to wait forever on rounds that all raised), and --json says
    so in its one document; no target is judged failed meanwhile."""
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(
        "watch-nokey",
        ports,
        host={
            "transport": "ssh",
            "address": "127.0.0.1",
            "port": closed_port(),
            "key": str(tmp_path / "nokey"),
            "http": "tunnel",
            "connect_timeout": 2,
            "service_manager": "pidfile",
        },
    )
    path = write_inventory(tmp_path / "inv.yaml", inv)
    timeline = tmp_path / "timeline.jsonl"
    r = pdctl(
        [
            "watch",
            "-i",
            str(path),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--once",
            "--json",
            "--timeline",
            str(timeline),
        ],
        state=tmp_path,
        timeout=60,
    )
    assert r.code == 2, r.output
    error = r.json()["error"]
    assert error["kind"] == "usage" and str(tmp_path / "nokey") in error["message"]
    lines = _timeline(timeline)
    assert lines and not any(line.get("status") == "fail" for line in lines), lines


def test_an_interrupted_watch_says_130_in_its_json_too(tmp_path):
    """Ctrl-C: the process exits 130 and the one JSON document says the same (it used to carry the state's own
    verdict, 1, under the same key)."""
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    path = write_inventory(tmp_path / "inv.yaml", local_inventory("watch-int", ports))
    timeline = tmp_path / "timeline.jsonl"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "COLUMNS": "80"}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "watch",
            "-i",
            str(path),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--for",
            "120",
            "--json",
            "--timeline",
            str(timeline),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until("a first round", lambda: any(line.get("event") == "round" for line in _timeline(timeline)), 60)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    doc = json.loads(out)
    assert p.returncode == 130 and doc["exit_code"] == 130 and doc["stopped_by"], (p.returncode, out, err)
