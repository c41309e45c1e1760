"""`pdctl watch` survives its own outputs (issue 28), as real processes against an inventory where nothing is deployed
(every port refused: rounds are quick and fail): a full disk (RLIMIT_FSIZE, the kernel's EFBIG: a disk full for
this process only) is an output event while the exporter serves, the rounds judge and the heal hook runs (W1); a
FIFO nobody reads blocks nothing and --for ends it, a reader that leaves is an event and the next one gets the kept
lines (C3, W1); a rotated timeline is followed and SIGHUP reopens it without stopping the watch (C4); stdout's reader
gone ends the watch quietly with its verdict (C2); a planted symlink is refused (S4); a name resolving to 0.0.0.0
is refused (S3, in a private mount namespace whose /etc/hosts says so)."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, write_inventory
from tests.fixtures.net import closed_port, free_port

pytestmark = pytest.mark.e2e

QUICK = {"inflight_window": 2, "inflight_interval": 1, "health_every": 1, "pairs_every": 1, "heal_pair_failures": 1}


def _inventory(tmp_path: Path, name: str, **watch) -> Path:
    ports = {k: closed_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    inv = local_inventory(name, ports)
    inv["watch"] = {**QUICK, **watch}
    return write_inventory(tmp_path / "inv.yaml", inv)


def _start(args: list[str], tmp_path: Path, **kw) -> subprocess.Popen:
    """`python -m pdctl ARGS` in a session of its own (no controlling terminal, as a service)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "200", "PDCTL_OPERATOR": "t"}
    return subprocess.Popen(
        [sys.executable, "-m", "pdctl", *args],
        cwd=REPO,
        env=env,
        stdout=kw.pop("stdout", subprocess.PIPE),
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        **kw,
    )


def _metrics(port: int) -> dict[str, float]:
    """/metrics as 'name{labels}' -> value (a refused connection: {})."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {k: float(v) for k, _, v in (line.rpartition(" ") for line in text.splitlines() if line[:1] != "#")}


def _until(what: str, fn, limit: float = 30.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {limit:g}s")


def _output_ok(m: dict[str, float], output: str) -> float | None:
    return next((v for k, v in m.items() if k.startswith("pdctl_output_ok{") and f'output="{output}"' in k), None)


def _rounds(m: dict[str, float]) -> float:
    return max((v for k, v in m.items() if k.startswith("pdctl_round_last_timestamp_seconds{")), default=0.0)


def test_a_full_disk_is_an_output_event_while_the_exporter_serves_the_rounds_judge_and_the_heal_runs(tmp_path):
    """W1: `--timeline` on a disk that fills mid-run killed the watch ("unexpected OSError", kind internal), its
    exporter and its heal hook. Here the file may grow by 2000 bytes, then every write fails with EFBIG."""
    inv, port, timeline = _inventory(tmp_path, "w1-full"), free_port(), tmp_path / "timeline.jsonl"

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    args = ["watch", "-i", str(inv), "--listen", f"127.0.0.1:{port}", "--timeline", str(timeline), "--for", "8"]
    p = _start([*args, "--heal", "dry", "--json"], tmp_path, preexec_fn=small_disk)
    try:
        failing = _until(
            "pdctl_output_ok 0 for the timeline", lambda: _output_ok(_metrics(port), f"timeline {timeline}") == 0
        )
        first = _rounds(_metrics(port))
        _until("rounds still completing after the disk filled", lambda: _rounds(_metrics(port)) > first)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert failing
    assert p.returncode == 1, (p.returncode, out, err)  # the deployment's verdict (nothing deployed), no "internal"
    doc = json.loads(out)
    assert doc["exit_code"] == 1 and doc["heals"].get("dry", 0) >= 1, doc["heals"]  # the heal hook ran
    (said,) = [w for w in doc["warnings"] if w.startswith(f"timeline {timeline}")]
    assert "File too large" in said and "unexpected" not in err and "Traceback" not in err, (said, err)
    assert 0 < timeline.stat().st_size <= 2000


def test_a_fifo_nobody_reads_blocks_nothing_and_a_reader_that_leaves_is_an_output_event(tmp_path):
    """C3: a FIFO without a reader blocked before the exporter and ignored --for (Ctrl-C then spoke of "a mutating
    action"). W1's variant: a FIFO whose reader left killed the watch. Now: the exporter answers, a reader gets
    the lines kept meanwhile, whole; its leaving is an output event; the next reader is told it recovered."""
    inv, fifo = _inventory(tmp_path, "c3-fifo"), tmp_path / "timeline.fifo"
    os.mkfifo(fifo)
    port = free_port()
    t0 = time.monotonic()
    short = _start(
        ["watch", "-i", str(inv), "--listen", f"127.0.0.1:{port}", "--timeline", str(fifo), "--for", "3"], tmp_path
    )
    _, err = short.communicate(timeout=30)
    assert short.returncode == 1 and time.monotonic() - t0 < 20, (short.returncode, err)  # --for, with no reader
    assert "a FIFO nobody reads" in err, err  # said at the end

    port = free_port()
    p = _start(["watch", "-i", str(inv), "--listen", f"127.0.0.1:{port}", "--timeline", str(fifo)], tmp_path)
    try:
        name = f"timeline {fifo}"
        _until("the exporter answering, the FIFO said failing", lambda: _output_ok(_metrics(port), name) == 0)
        first = _read_until(fifo, lambda data: data.count(b"\n") >= 3)  # what was kept since the start
        _until("its leaving said failing", lambda: _output_ok(_metrics(port), name) == 0)
        second = _read_until(fifo, lambda data: b'"status": "recovered"' in data)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    # whatever the first reader left unread in the pipe is the second's: together, every line whole
    lines = [json.loads(line) for line in (first + second).splitlines()]
    assert all(line["deployment"] == "c3-fifo" for line in lines)
    recovered = [x for x in lines if x.get("event") == "output" and x["status"] == "recovered"]
    assert recovered and recovered[0]["output"] == name, lines
    assert p.returncode == 130 and "watch stopped by SIGINT" in err and "mutating" not in err, (p.returncode, err)


def _read_until(fifo: Path, done, limit: float = 30.0) -> bytes:
    """Open the FIFO for reading, read (unbuffered) until done(data) or `limit` seconds, close it."""
    import select

    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data, deadline = b"", time.monotonic() + limit
    try:
        while not done(data):
            assert time.monotonic() < deadline, f"not within {limit:g}s: {data[-500:]!r}"
            select.select([fd], [], [], 0.5)
            try:
                data += os.read(fd, 1 << 16)
            except BlockingIOError:
                pass
    finally:
        os.close(fd)
    return data


def test_a_rotated_timeline_is_followed_and_sighup_reopens_it_without_stopping_the_watch(tmp_path):
    """C4: logrotate renamed the timeline (the watch kept writing the old file), and its SIGHUP stopped the watch."""
    inv, port, timeline = _inventory(tmp_path, "c4-rotate"), free_port(), tmp_path / "timeline.jsonl"
    p = _start(["watch", "-i", str(inv), "--listen", f"127.0.0.1:{port}", "--timeline", str(timeline)], tmp_path)
    try:
        _until("a first line", lambda: timeline.exists() and timeline.stat().st_size > 0)
        timeline.rename(tmp_path / "timeline.jsonl.1")  # rotated without a signal (create mode)
        _until("a new file at the path", timeline.exists)
        assert stat.S_IMODE(timeline.stat().st_mode) == 0o600
        timeline.rename(tmp_path / "timeline.jsonl.2")
        p.send_signal(signal.SIGHUP)  # logrotate's postrotate
        _until("a new file after SIGHUP", timeline.exists)
        size = (tmp_path / "timeline.jsonl.2").stat().st_size
        _until("lines in it", lambda: timeline.stat().st_size > 0)
        assert p.poll() is None, p.communicate()
        assert (tmp_path / "timeline.jsonl.2").stat().st_size == size  # the rotated file is left alone
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130 and "SIGTERM" in err, (p.returncode, err)


@pytest.mark.parametrize("timeline", [["--timeline", "-"], []], ids=["timeline-stdout", "change-lines"])
def test_stdout_closed_ends_the_watch_quietly_with_its_verdict(tmp_path, timeline):
    """C2: `pdctl watch --timeline - | head -1` exited 141 (a piped watch without --timeline: its change lines,
    the same)."""
    inv = _inventory(tmp_path, "c2-head")
    t0 = time.monotonic()
    p = _start(["watch", "-i", str(inv), "--listen", f"127.0.0.1:{free_port()}", *timeline, "--for", "60"], tmp_path)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    code = p.wait(30)
    assert code in (1, 3) and time.monotonic() - t0 < 30, (code, err)  # the verdict so far (nothing deployed)
    assert "error" not in err and "Traceback" not in err, err


def test_a_timeline_symlink_planted_in_a_shared_directory_is_refused(tmp_path):
    """S4: a symlink in a 1777 directory made root append 72 lines to a root-owned file."""
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim.write_text("keep\n")
    (shared / "timeline.jsonl").symlink_to(victim)
    inv = _inventory(tmp_path, "s4-link")
    args = ["watch", "-i", str(inv), "--listen", f"127.0.0.1:{free_port()}", "--once", "--json"]
    p = _start([*args, "--timeline", str(shared / "timeline.jsonl")], tmp_path)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2, (out, err)
    error = json.loads(out)["error"]
    assert error["message"].startswith(f"--timeline {shared / 'timeline.jsonl'}: is a symbolic link"), error
    assert victim.read_text() == "keep\n"


def _private_hosts_runs() -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _private_hosts_runs(), reason="needs root and unshare (a private mount namespace)")
def test_a_listen_name_that_resolves_to_every_interface_is_refused(tmp_path):
    """S3: `--listen 127.evil.example:P` (the name resolves to 0.0.0.0) listened on every interface without
    --listen-any, `watch.listen` too. /etc/hosts is replaced inside a private mount namespace only."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n0.0.0.0 127.evil.example\n127.0.0.1 127.good.example\n")
    port = free_port()
    inv = _inventory(tmp_path, "s3-name")
    data = (tmp_path / "inv.yaml").read_text() + f"  listen: 127.evil.example:{port}\n"
    (tmp_path / "inv2.yaml").write_text(data)

    def watch(*args: str) -> subprocess.CompletedProcess:
        pdctl = " ".join([sys.executable, "-m", "pdctl", "watch", *args])
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "COLUMNS": "200"}
        cmd = f"mount --bind {hosts} /etc/hosts && exec {pdctl}"
        return subprocess.run(
            ["unshare", "--mount", "sh", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )

    r = watch("-i", str(inv), "--listen", f"127.evil.example:{port}", "--once", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    assert json.loads(r.stdout)["error"]["message"] == (
        f"--listen 127.evil.example:{port}: 127.evil.example resolves to 0.0.0.0, not a loopback address; "
        "the exporter has no authentication"
    )
    r = watch("-i", str(tmp_path / "inv2.yaml"), "--once")
    assert r.returncode == 2 and f"watch.listen 127.evil.example:{port} (in {tmp_path / 'inv2.yaml'})" in r.stderr, (
        r.stderr
    )
    r = watch("-i", str(inv), "--listen", f"127.good.example:{port}", "--once", "--json")  # a loopback name: served
    assert r.returncode in (1, 3) and json.loads(r.stdout)["rounds"], r.stdout + r.stderr
