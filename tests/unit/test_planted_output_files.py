"""Every file pdctl writes where a user names it refuses a path planted by someone else (issue 28, S4: a symlink in
a 1777 directory made root append to a root-owned file; "every file pdctl writes is opened safely"): the audit log
(PDCTL_AUDIT_LOG), --report, known_hosts when a new host key is accepted, the baseline. Each: the reproduction (a
symlink in a sticky world-writable directory pointing at a file the test owns, which stays unchanged) and a variant
(a hard link, a FIFO); a clear error naming the file with its exit code, no traceback. Real files; one real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import paramiko
import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    shared = tmp_path / "shared"  # like /tmp
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = tmp_path / "victim"  # the file the link points at: the test's own, as root's was
    victim.write_text("keep\n")
    return SimpleNamespace(tmp=tmp_path, shared=shared, victim=victim)


def _untouched(e) -> None:
    assert e.victim.read_text() == "keep\n"


def _playbook(e) -> Path:
    p = e.tmp / "pb.yaml"
    step = {"name": "touch", "action": "shell", "args": {"role": "decode", "command": f"touch {e.tmp}/ran"}}
    p.write_text(yaml.safe_dump({"name": "pb", "steps": [step]}))
    return p


# -- the audit log (PDCTL_AUDIT_LOG) -------------------------------------------------------------------------------


def test_an_audit_log_planted_as_a_symlink_refuses_the_action_and_the_target_is_untouched(env, monkeypatch):
    log = env.shared / "audit.jsonl"
    log.symlink_to(env.victim)
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    r = CliRunner().invoke(app, ["run", str(_playbook(env)), "--json"])
    assert r.exit_code == 2, r.output
    error = json.loads(r.stdout)["error"]
    assert error["message"].startswith(f"audit log {log}: is a symbolic link"), error
    assert "refusing to run pb (nothing was done)" in error["message"] and "PDCTL_AUDIT_LOG" in error["hint"]
    _untouched(env)
    assert not (env.tmp / "ran").exists()  # the step never ran


def test_an_audit_log_hard_linked_to_another_file_is_refused_and_that_file_untouched(env, monkeypatch):
    from pdctl import audit

    log = env.shared / "audit.jsonl"
    os.link(env.victim, log)
    with pytest.raises(UsageError, match=r"audit log .*audit\.jsonl: has 1 other hard link") as ei:
        audit.append("deploy", inventory="<embedded default>", result="ok", started=0.0, path=log)
    assert ei.value.exit_code == 2 and "PDCTL_AUDIT_LOG" in ei.value.hint
    _untouched(env)


def test_a_new_audit_log_is_0600_in_a_0700_directory_whatever_the_umask(env):
    from pdctl import audit

    log = env.tmp / "logs" / "audit.jsonl"
    old = os.umask(0o022)
    try:
        audit.append("deploy", inventory="<embedded default>", result="ok", started=0.0, path=log)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600 and stat.S_IMODE(os.stat(log.parent).st_mode) == 0o700
    assert json.loads(log.read_text())["action"] == "deploy"


# -- --report ------------------------------------------------------------------------------------------------------


def _final_health_that(monkeypatch, during=None):
    """final-health's observation replaced by a failing verdict (and `during()` run while it is made)."""
    from pdctl.checks.result import CheckResult, Status
    from pdctl.ops import verify

    def fake(dep, *, since_baseline, record, layers=()):
        if during is not None:
            during()
        return verify.HealthReport(
            dep.inv.source, {"health": [CheckResult("health", "router[0]", "/health", Status.FAIL, observed="503")]}
        )

    monkeypatch.setattr(verify, "final_health_with_baseline", fake)


def test_a_report_planted_as_a_symlink_is_refused_before_final_health_runs(env, monkeypatch):
    ran: list = []
    _final_health_that(monkeypatch, during=lambda: ran.append(1))
    out = env.shared / "fh.html"
    out.symlink_to(env.victim)
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(out)])
    assert r.exit_code == 2, r.output
    assert f"--report {out}: is a symbolic link" in r.stderr and "not a link" in r.stderr
    assert ran == [] and "Traceback" not in r.output
    _untouched(env)
    assert out.is_symlink()


def test_a_report_link_planted_while_final_health_runs_is_refused_on_saving(env, monkeypatch):
    out = env.shared / "fh.svg"
    _final_health_that(monkeypatch, during=lambda: out.symlink_to(env.victim))
    r = CliRunner().invoke(app, ["verify", "final-health", "--report", str(out)])
    assert r.exit_code == 1, r.output  # the verdict's exit code stands; the report is said not saved
    assert f"--report {out}: is a symbolic link" in r.stderr
    _untouched(env)
    assert not [p for p in env.shared.iterdir() if p.name.startswith(".pdctl-")]


def test_a_report_hard_linked_to_another_file_is_refused(env):
    out = env.shared / "h.html"
    os.link(env.victim, out)
    r = CliRunner().invoke(app, ["history", "--report", str(out), "--json"])
    assert r.exit_code == 2, r.output
    error = json.loads(r.stdout)["error"]
    assert error["message"] == f"--report {out}: has 1 other hard link(s); pdctl does not write into a linked file"
    _untouched(env)


def test_a_report_is_replaced_whole_and_readable(env):
    out = env.tmp / "h.html"
    out.write_text("old")
    r = CliRunner().invoke(app, ["history", "--report", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("<!DOCTYPE html>") and stat.S_IMODE(os.stat(out).st_mode) & 0o600 == 0o600


def test_a_real_process_names_the_planted_report_with_exit_2_and_no_traceback(env):
    out = env.shared / "fh.html"
    out.symlink_to(env.victim)
    run_env = {k: v for k, v in os.environ.items() if k not in ("PDCTL_INVENTORY", "PDCTL_AUDIT_LOG")}
    run_env.update(XDG_STATE_HOME=str(env.tmp / "state"), COLUMNS="200")
    p = subprocess.run(
        [sys.executable, "-m", "pdctl", "history", "--report", str(out)],
        cwd=REPO,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert f"error: --report {out}: is a symbolic link" in p.stderr and "Traceback" not in p.stderr
    _untouched(env)


# -- known_hosts, when a new host key is accepted -------------------------------------------------------------------


@pytest.fixture(scope="module")
def key():
    return paramiko.ECDSAKey.generate()


def _accept_new(path, key, client=None):
    """The host key policy of a host with `accept_new_host_key: true` meeting `key`: what the client trusts."""
    from pdctl.transport.known_hosts import HostKeyPolicy

    policy = HostKeyPolicy("'gpu-1' (127.0.0.1:2222)", str(path), accept_new=True, inventory_name="gpu-1")
    client = client or paramiko.SSHClient()
    policy.missing_host_key(client, "[127.0.0.1]:2222", key)
    return client.get_host_keys().lookup("[127.0.0.1]:2222")


def test_known_hosts_planted_as_a_symlink_is_refused_and_the_key_not_trusted(env, key):
    kh = env.shared / "known_hosts"
    kh.symlink_to(env.victim)
    client = paramiko.SSHClient()
    with pytest.raises(UsageError) as ei:
        _accept_new(kh, key, client)
    err = ei.value
    assert err.exit_code == 2
    assert err.message.startswith("host 'gpu-1' (127.0.0.1:2222): cannot record its new host key ecdsa-sha2-nistp256")
    assert f"known_hosts {kh}: is a symbolic link" in err.message and "`known_hosts`" in err.hint
    _untouched(env)
    assert client.get_host_keys().lookup("[127.0.0.1]:2222") is None  # nothing trusted that was not recorded


@pytest.mark.parametrize("variant", ["hard link", "fifo"])
def test_known_hosts_that_is_a_hard_link_or_a_fifo_is_refused_without_blocking(env, key, variant):
    kh = env.shared / "known_hosts"
    if variant == "hard link":
        os.link(env.victim, kh)
        why = "has 1 other hard link"
    else:
        os.mkfifo(kh)  # opening it for writing would block with no reader
        why = r"is a FIFO \(named pipe\), not a regular file"
    with pytest.raises(UsageError, match=why):
        _accept_new(kh, key)
    _untouched(env)


def test_known_hosts_of_our_own_gets_the_key_on_a_line_of_its_own(env, key):
    kh = env.tmp / "known_hosts"
    kh.write_text("other ssh-rsa AAAA")  # no newline at the end
    assert _accept_new(kh, key) is not None
    assert kh.read_text() == f"other ssh-rsa AAAA\n[127.0.0.1]:2222 {key.get_name()} {key.get_base64()}\n"


# -- the baseline (final-health --record-baseline) ----------------------------------------------------------------


def test_a_baseline_planted_as_a_symlink_is_not_written_and_says_why(env, monkeypatch):
    from pdctl import state
    from pdctl.ops import baseline

    monkeypatch.setattr(baseline, "read_transfer_counters", lambda dep: {})
    dep = SimpleNamespace(inv=SimpleNamespace(name="seed"))
    path = baseline.baseline_path(dep)
    assert stat.S_IMODE(os.stat(state.state_dir()).st_mode) == 0o700  # made private
    path.symlink_to(env.victim)
    record = baseline.record_baseline(dep)
    assert not record.recorded and "is a symbolic link" in (record.error or "")
    _untouched(env)
    path.unlink()
    os.link(env.victim, path)  # the variant: a hard link
    record = baseline.record_baseline(dep)
    assert not record.recorded and "other hard link" in (record.error or "")
    _untouched(env)
    path.unlink()
    assert baseline.record_baseline(dep).recorded and json.loads(path.read_text()) == {}
