"""A host's state_dir reached through another user's link (issue 28, S4, second re-pass): with `hosts.local.state_dir:
$T/sticky/pdir/st`, `pdir -> $T/victim` nobody's in a 1777 `sticky/`, `pdctl down` made root create `victim/st/locks/`
and `down --purge` deleted `victim/st/pdctl-local-decode-0.{json,log}`. Now pdctl.services.state_dir_guard walks the
path on the host through its transport before the lock or any pidfile write or removal, and refuses (exit 4)
naming `hosts.local.state_dir`, the link and why. Variants: another user's 0777 directory on the way; a normal
state_dir under tmp_path still made and used; a log file planted as a link is not appended to. Real files, the
local transport (its `sh`, `ls`, `readlink`), `pdctl down` in process and once as a real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.checks.host_path import judge_walk, mode_from_ls, parse_walk
from pdctl.cli.app import app
from pdctl.errors import StepFailed
from pdctl.inventory import embedded_default
from pdctl.services.base import ServiceSpec
from pdctl.services.pidfile import PidfileManager
from pdctl.services.state_dir_guard import StateDirRefused, ensure_state_dir
from pdctl.transport.local import LocalTransport

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link to another user")


def test_ls_modes_and_a_walk_are_read_and_judged():
    assert mode_from_ls("drwxrwxrwt") == stat.S_IFDIR | 0o1777
    assert mode_from_ls("-rwsr-S---+") == stat.S_IFREG | 0o4740 | stat.S_ISGID
    assert mode_from_ls("lrwxrwxrwx") == stat.S_IFLNK | 0o777
    with pytest.raises(ValueError):
        mode_from_ls("?")
    out = "EUID\t0\nE\tdrwxr-xr-x\t0\t0\t\t/\nE\tdrwxrwxrwt\t0\t0\t/\t/tmp\n"
    planted = out + "E\tlrwxrwxrwx\t65534\t65534\t/tmp\t/tmp/pdir\nE\tdrwxr-xr-x\t0\t0\t/\t/v\nEND\t/v\n"
    assert judge_walk(parse_walk(planted)).startswith(
        "goes through /tmp/pdir, a symbolic link of uid 65534 in the directory /tmp (sticky mode 1777)"
    )
    mine = out + "E\tdrwx------\t0\t0\t/tmp\t/tmp/st\nEND\t/tmp/st\n"
    assert judge_walk(parse_walk(mine)) is None
    assert judge_walk(parse_walk(out + "END\t/tmp\n")).startswith("leads to the directory /tmp (sticky mode 1777)")
    with pytest.raises(ValueError):
        parse_walk(out)  # no end: a walk cut short is never judged safe


@pytest.fixture
def t(tmp_path, monkeypatch):
    """$T/sticky (1777) holding nobody's `pdir -> $T/victim`; victim/st holds a decode role's spec and log."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PDCTL_OPERATOR", "unit-operator")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    victim = tmp_path / "victim"
    (victim / "st").mkdir(parents=True)
    for name in ("pdctl-local-decode-0.json", "pdctl-local-decode-0.log"):
        (victim / "st" / name).write_text("keep\n")
    pdir = sticky / "pdir"
    pdir.symlink_to(victim)
    if os.geteuid() == 0:
        os.lchown(pdir, NOBODY, NOBODY)
    return SimpleNamespace(tmp=tmp_path, sticky=sticky, victim=victim, pdir=pdir)


def _inventory(t, state_dir) -> Path:
    data = embedded_default().dump()
    data["hosts"]["local"]["state_dir"] = str(state_dir)
    path = t.tmp / "inv.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _victim(t) -> list[str]:
    return sorted(str(p.relative_to(t.victim)) for p in t.victim.rglob("*"))


UNTOUCHED = ["st", "st/pdctl-local-decode-0.json", "st/pdctl-local-decode-0.log"]


@root
@pytest.mark.parametrize("purge", [False, True], ids=["down", "down --purge"])
def test_pdctl_down_through_the_planted_state_dir_is_refused_and_victim_unchanged(t, purge):
    st = t.pdir / "st"
    r = CliRunner().invoke(app, ["down", "-i", str(_inventory(t, st)), "--json"] + (["--purge"] if purge else []))
    assert r.exit_code == 4, r.output
    error = json.loads(r.stdout)["error"]
    assert error["kind"] == "refused"
    assert error["message"].startswith(
        f"hosts.local.state_dir {st}: goes through {t.pdir}, a symbolic link of uid 65534 in the directory "
        f"{t.sticky} (sticky mode 1777) that every user may write into"
    ), error
    assert "state_dir" in error["hint"]
    assert _victim(t) == UNTOUCHED  # no locks/ made, no spec or log removed


@root
def test_another_users_0777_directory_on_the_way_is_refused_by_a_real_process(t):
    """Variant: no link, but nobody's non-sticky 0777 directory holds the state_dir (nobody can swap `st`)."""
    adir = t.sticky / "adir"
    adir.mkdir()
    os.chmod(adir, 0o777)
    os.chown(adir, NOBODY, NOBODY)
    st = adir / "st"
    env = {k: v for k, v in os.environ.items() if k not in ("PDCTL_INVENTORY", "PDCTL_AUDIT_LOG")}
    env.update(XDG_STATE_HOME=str(t.tmp / "xdg"), COLUMNS="200")
    p = subprocess.run(
        [sys.executable, "-m", "pdctl", "down", "-i", str(_inventory(t, st)), "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 4, p.stderr
    message = json.loads(p.stdout)["error"]["message"]
    assert message.startswith(f"hosts.local.state_dir {st}: goes through {adir}, a directory of uid 65534 in the"), (
        message
    )
    assert "Traceback" not in p.stderr and not st.exists()


def test_a_normal_state_dir_is_made_and_used(t):
    """Variant: a state_dir under tmp_path, missing: made (plain mkdir, one level at a time), `pdctl down` ok."""
    st = t.tmp / "home" / "state" / "pdctl"
    r = CliRunner().invoke(app, ["down", "-i", str(_inventory(t, st)), "--json"])
    assert r.exit_code == 0, r.output
    assert st.is_dir() and (st / "locks").is_dir()
    tr = LocalTransport("local")
    ensure_state_dir(tr, str(st))
    os.rename(st, t.tmp / "moved")
    ensure_state_dir(tr, str(st))  # checked once per transport (host, run): not asked again
    assert not st.exists()
    with pytest.raises(StateDirRefused, match=r"^hosts\.h\.state_dir rel: not an absolute path"):
        ensure_state_dir(LocalTransport("h"), "rel")


def test_a_log_planted_as_a_link_is_not_created_nor_appended_to_through_it(t):
    st = t.tmp / "st"
    st.mkdir()
    target = t.tmp / "elsewhere.txt"
    target.write_text("keep\n")
    m = PidfileManager(LocalTransport("local"), str(st))
    m.install(ServiceSpec(name="svc", argv=("sleep", "30")))
    (st / "svc.log").symlink_to(target)
    with pytest.raises(StepFailed, match=r"svc\.log: a symbolic link, not followed"):
        m.start("svc")
    assert target.read_text() == "keep\n" and not (st / "svc.pid").exists()
