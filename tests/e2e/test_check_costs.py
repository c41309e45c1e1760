"""What one final-health run costs the hosts and this machine, counted on real parts (issue 11): over a real sshd,
ONE SSH connection and ONE remote command that reads /proc per host; locally, only the modules the run needs.

The sshd runs every command through a ForceCommand wrapper that logs it before running it (SFTP still works), and
logs accepted connections (LogLevel VERBOSE). No timing is asserted: counts only.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, local_inventory, pdctl, write_inventory
from tests.fixtures.net import free_port
from tests.fixtures.sshd import running_sshd, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

SFTP_SERVER = "/usr/lib/openssh/sftp-server"


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """A deployment over an sshd that logs every command and connection; yields paths and inventories."""
    if not os.path.exists(SFTP_SERVER):
        pytest.skip(f"{SFTP_SERVER} missing")
    wd = tmp_path_factory.mktemp("sshd-counting")
    commands = wd / "commands.log"
    wrapper = write_script(
        wd / "force.sh",
        f"""#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  *sftp*) echo SFTP >> {commands}; exec {SFTP_SERVER} ;;
esac
printf '%s' "$SSH_ORIGINAL_COMMAND" | base64 -w0 >> {commands}; echo >> {commands}
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""",
    )
    with running_sshd(wd, log_level="VERBOSE", extra_config=(f"ForceCommand {wrapper}",)) as sshd:
        ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
        remote_state = str(wd / "remote-state")
        host = {
            "transport": "ssh",
            "address": sshd.address,
            "port": sshd.port,
            "user": sshd.user,
            "key": str(sshd.key_path),
            "known_hosts": str(sshd.known_hosts),
            "connect_timeout": 5,
            "ssh_config": "none",
            "http": "tunnel",
            "service_manager": "pidfile",
            "python": sys.executable,
            "state_dir": remote_state,
        }
        inv = write_inventory(wd / "inv.yaml", local_inventory("costs", ports, host=host))
        local = write_inventory(
            wd / "local.yaml",
            local_inventory(  # the same processes, seen from this machine
                "costs",
                ports,
                host={
                    "transport": "local",
                    "service_manager": "pidfile",
                    "python": sys.executable,
                    "state_dir": remote_state,
                },
            ),
        )
        try:
            r = pdctl(["deploy", "-i", str(inv), "--no-verify"], state=wd)
            assert r.code == 0, r.output
            yield {"wd": wd, "inv": inv, "local": local, "commands": commands, "sshd_log": wd / "sshd.log"}
        finally:
            pdctl(["down", "-i", str(inv)], state=wd, timeout=120)


def _accepted(log: Path) -> int:
    return log.read_text(errors="replace").count("Accepted publickey")


def _logged_commands(path: Path) -> list[str]:
    return [
        line if line == "SFTP" else base64.b64decode(line).decode(errors="replace")
        for line in path.read_text().splitlines()
        if line
    ]


def test_final_health_over_ssh_opens_one_connection_and_reads_proc_once(counted):
    connections, seen = _accepted(counted["sshd_log"]), len(_logged_commands(counted["commands"]))
    r = pdctl(["verify", "final-health", "-i", str(counted["inv"]), "--json"], state=counted["wd"])
    assert r.code == 0, r.output
    assert r.json()["ok"]
    assert "Traceback" not in r.stderr, r.stderr  # the tunnel's pipes end quietly when the connection closes
    assert _accepted(counted["sshd_log"]) - connections == 1
    ran = _logged_commands(counted["commands"])[seen:]
    assert len([c for c in ran if "/proc/" in c]) == 1, ran  # one host: one command reads every role's /proc
    assert len(ran) <= 3, ran  # and besides it only the reachability `true` and the lineage record's SFTP read


HEAVY = (
    "paramiko",
    "cryptography",
    "typer.rich_utils",
    "rich.markdown",
    "markdown_it",
)
#: The packages a local final-health run may load beyond the standard library, and a bound on their modules. When
#: this fails the message lists what loaded: add a package only if the run needs it. httpx and prometheus_client
#: are the libraries the probes use, whole, as their packages import (issue 26); httpx's own import brings its CLI
#: (click, pygments, rich) when those are installed, and httpcore brings trio (with attr, outcome,
#: sortedcontainers) where trio is installed, as on the test machines.
ON_FINAL_HEALTH_PATH = {
    "pdctl",
    "typer",
    "annotated_doc",
    "shellingham",
    "msgspec",
    "typing_extensions",
    "yaml",
    "_yaml",
    "rich",
    "cython_runtime",  # cython_runtime: yaml's C loader
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
    "click",
    "pygments",
    "trio",
    "attr",
    "outcome",
    "sortedcontainers",
    "prometheus_client",
    # typer >= 0.29 converts option values through a pydantic TypeAdapter (the typer pin is gone: issue 26)
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
}
MAX_NON_STDLIB_MODULES = 470  # 442 in issue 26 with httpx (trio 51 modules, click, pygments), the whole
# prometheus_client and typer 0.29's pydantic; 190 before, with a hand-written client and a parser copy


def test_a_local_final_health_run_loads_only_what_it_needs(counted, tmp_path):
    import subprocess

    out = tmp_path / "modules.txt"
    code = (
        "import atexit, sys; path = sys.argv[1]; "
        "atexit.register(lambda: open(path, 'w').write(chr(10).join(sys.modules))); "
        "import runpy; sys.argv[1:] = sys.argv[2:]; runpy.run_module('pdctl', run_name='__main__')"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(out), "verify", "final-health", "-i", str(counted["local"])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_STATE_HOME": str(counted["wd"]), "COLUMNS": "80"},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "final-health: PASS" in p.stdout
    bare = tmp_path / "bare.txt"  # what the interpreter loads by itself (.pth files), not the run's doing
    subprocess.run([sys.executable, "-c", code.split("; import runpy")[0], str(bare)], capture_output=True, timeout=60)
    loaded = set(out.read_text().split()) - set(bare.read_text().split()) - {"__main__"}
    assert sorted(m for m in loaded for h in HEAVY if m == h or m.startswith(h + ".")) == []
    foreign = sorted(
        m
        for m in loaded
        if m.split(".")[0] not in sys.stdlib_module_names and not m.startswith(("_sysconfigdata", "_cython_"))
    )  # sysconfig's data; yaml's Cython
    assert {m.split(".")[0] for m in foreign} <= ON_FINAL_HEALTH_PATH, foreign
    assert len(foreign) <= MAX_NON_STDLIB_MODULES, len(foreign)
