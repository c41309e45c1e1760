"""Links and directories of another user that are not in a sticky directory (issue 28, S4, second re-pass):
`sticky/adir/` (uid 65534, 0777, not sticky) holding `sub -> victim` made `PDCTL_AUDIT_LOG=$T/sticky/adir/sub/tl.jsonl
pdctl run pb.yaml` and `--report $T/sticky/adir/sub/rep.html` write into victim as root: pdctl.safe_path applied
only the kernel's protected_symlinks rule. Now (pdctl.checks.path_trust) a link is followed only when it belongs to
the euid or root or sits in a private directory (the euid's or root's, no other user may write), and no file is
written into a directory of another non-root user. Variants: a group-writable directory of another gid; a 0755
directory of another user holding a link its owner made (refused: decided, its owner can chmod it at will); a root
link in another user's directory. Real directories and links under tmp_path, given to nobody with lchown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.checks.path_trust import Entry, link_refusal, swap_refusal, untrusted_dir, write_into_refusal
from pdctl.cli.app import app
from pdctl.errors import UsageError
from pdctl.safe_write import open_append, write_whole

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another user")


@pytest.fixture
def t(tmp_path, monkeypatch):
    """$T/sticky (1777, root's) holding adir (nobody's, 0777, not sticky) holding `sub -> $T/victim` (nobody's)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("PDCTL_AUDIT_LOG", raising=False)
    monkeypatch.delenv("PDCTL_INVENTORY", raising=False)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    adir = sticky / "adir"
    adir.mkdir()
    os.chmod(adir, 0o777)
    os.chown(adir, NOBODY, NOBODY)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "tl.jsonl").write_text("keep\n")
    sub = adir / "sub"
    sub.symlink_to(victim)
    os.lchown(sub, NOBODY, NOBODY)
    return SimpleNamespace(tmp=tmp_path, sticky=sticky, adir=adir, victim=victim, sub=sub)


def _untouched(t) -> None:
    assert (t.victim / "tl.jsonl").read_text() == "keep\n"
    assert sorted(p.name for p in t.victim.iterdir()) == ["tl.jsonl"]


def _append(path) -> None:
    fd = open_append(path, UsageError, "audit log")
    os.close(fd)


# -- the judges (pure) ---------------------------------------------------------------------------------------------
D, L = 0o040000, 0o120000


def test_the_rule_on_numbers():
    euid = 1000
    tmp, adir = Entry(D | 0o1777, 0, 0), Entry(D | 0o777, NOBODY, NOBODY)
    theirs, team = Entry(D | 0o755, NOBODY, NOBODY), Entry(D | 0o775, 0, 50)
    mine, roots = Entry(L | 0o777, euid, euid), Entry(L | 0o777, 0, 0)
    other = Entry(L | 0o777, NOBODY, NOBODY)
    assert link_refusal(mine, adir, euid) is None and link_refusal(roots, theirs, euid) is None
    assert link_refusal(other, Entry(D | 0o755, 0, 0), euid) is None  # a private directory: only root put it there
    assert link_refusal(other, Entry(D | 0o775, euid, 0), euid) is None  # group root's: still private
    assert link_refusal(other, tmp, euid) == "(sticky mode 1777) that every user may write into"
    assert link_refusal(other, adir, euid) == "of uid 65534"
    assert link_refusal(other, theirs, euid) == "of uid 65534"  # decided: the owner may chmod it at will
    assert link_refusal(other, team, euid) == "(mode 0775) that group 50 may write into"
    assert untrusted_dir(Entry(D | 0o700, euid, euid), euid) is None
    assert write_into_refusal(theirs, euid) == "belongs to uid 65534, who may replace what pdctl writes there"
    assert write_into_refusal(tmp, euid) is None and write_into_refusal(team, euid) is None
    # a shell path is looked up afresh: a directory in /tmp is safe only when it is the euid's or root's
    assert swap_refusal(Entry(D | 0o700, euid, euid), tmp, euid) is None
    assert (
        swap_refusal(Entry(D | 0o700, NOBODY, NOBODY), tmp, euid) == "(sticky mode 1777) that every user may write into"
    )
    assert swap_refusal(Entry(D | 0o700, euid, euid), adir, euid) == "of uid 65534"
    assert swap_refusal(Entry(D | 0o700, euid, euid), Entry(D | 0o777, 0, 0), euid) is not None  # not sticky


# -- the library, real files ---------------------------------------------------------------------------------------
@root
def test_the_link_in_another_users_0777_directory_is_refused_for_every_writer(t):
    """The reproduction, in the library: the link is nobody's, in nobody's non-sticky 0777 directory."""
    msg = rf"goes through {t.sub}, a symbolic link of uid 65534 in the directory {t.adir} of uid 65534; "
    for attempt in (
        lambda: _append(t.sub / "tl.jsonl"),
        lambda: _append(t.sub / "new.jsonl"),
        lambda: write_whole(t.sub / "rep.html", "x", UsageError, "--report"),
    ):
        with pytest.raises(UsageError, match=msg) as ei:
            attempt()
        assert ei.value.exit_code == 2
    _untouched(t)


@root
def test_a_root_link_there_is_followed_but_no_file_is_written_into_their_directory(t):
    """A link of root's is root's word, even in nobody's directory; writing into nobody's directory is refused,
    named (nobody may swap the file afterwards)."""
    (t.adir / "sub").unlink()
    (t.adir / "sub").symlink_to(t.victim)  # root's own link now
    _append(t.adir / "sub" / "tl.jsonl")
    with pytest.raises(UsageError, match=rf"^--report {t.adir}/rep.html: the directory {t.adir} belongs to uid 65534"):
        write_whole(t.adir / "rep.html", "x", UsageError, "--report")
    assert not (t.adir / "rep.html").exists()


@root
def test_a_group_writable_directory_of_another_gid_and_a_0755_directory_of_another_user(t):
    team = t.tmp / "team"  # root's, but group nobody may write into it
    team.mkdir()
    os.chmod(team, 0o775)
    os.chown(team, 0, NOBODY)
    (team / "l").symlink_to(t.victim)
    os.lchown(team / "l", NOBODY, NOBODY)
    with pytest.raises(UsageError, match=rf"in the directory {team} \(mode 0775\) that group 65534 may write into"):
        _append(team / "l" / "tl.jsonl")
    home = t.tmp / "home"  # nobody's 0755 home with a link nobody made: refused (decided)
    home.mkdir(mode=0o755)
    os.chown(home, NOBODY, NOBODY)
    (home / "logs").symlink_to(t.victim)
    os.lchown(home / "logs", NOBODY, NOBODY)
    with pytest.raises(UsageError, match=rf"in the directory {home} of uid 65534; "):
        write_whole(home / "logs" / "rep.html", "x", UsageError, "--report")
    _untouched(t)


# -- the commands ------------------------------------------------------------------------------------------------
@root
def test_pdctl_run_with_the_planted_audit_log_is_refused_and_victim_untouched(t, monkeypatch):
    """`PDCTL_AUDIT_LOG=$T/sticky/adir/sub/tl.jsonl pdctl run pb.yaml`: refused before the step runs."""
    log = t.sub / "tl.jsonl"
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(log))
    pb = t.tmp / "pb.yaml"
    step = {"name": "touch", "action": "shell", "args": {"role": "decode", "command": f"touch {t.tmp}/ran"}}
    pb.write_text(yaml.safe_dump({"name": "pb", "steps": [step]}))
    r = CliRunner().invoke(app, ["run", str(pb), "--json"])
    assert r.exit_code == 2, r.output
    message = json.loads(r.stdout)["error"]["message"]
    assert message.startswith(f"audit log {log}: goes through {t.sub}, a symbolic link of uid 65534"), message
    assert not (t.tmp / "ran").exists()
    _untouched(t)


@root
def test_a_real_process_refuses_the_planted_report_with_exit_2(t):
    """`--report $T/sticky/adir/sub/rep.html`, a real pdctl process."""
    out = t.sub / "rep.html"
    env = {k: v for k, v in os.environ.items() if k not in ("PDCTL_INVENTORY", "PDCTL_AUDIT_LOG")}
    env.update(XDG_STATE_HOME=str(t.tmp / "state"), COLUMNS="200")
    p = subprocess.run(
        [sys.executable, "-m", "pdctl", "history", "--report", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    said = " ".join(p.stderr.split())  # the terminal renderer wraps long lines
    assert f"error: --report {out}: goes through {t.sub}, a symbolic link of uid 65534 in the directory" in said
    assert "Traceback" not in p.stderr
    _untouched(t)
