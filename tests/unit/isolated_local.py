"""The bundled local deployment, isolated for one test: pdctl's state, audit log and the host's state directory under
tmp_path, every port free; and a live process recorded as its decode, found by the pidfile pdctl would have written.
For the end-to-end masking tests (tests/unit/test_secret_urls.py, test_flags_secret_scrub.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pdctl.inventory import embedded_default
from tests.fixtures.net import free_port


def local_inventory(tmp_path: Path, monkeypatch) -> dict:
    """The embedded default as data, to add to and write: nothing of another test's deployment is read."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PDCTL_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("COLUMNS", "200")
    data = embedded_default().dump()
    data["hosts"]["local"]["state_dir"] = str(tmp_path / "remote-state")
    data["watch"]["listen"] = f"127.0.0.1:{free_port()}"  # the watch's exporter
    for role, instances in data["roles"].items():
        instances[0]["port"] = free_port()
        if role == "prefill":
            instances[0]["bootstrap_port"] = free_port()
    return data


@contextmanager
def live_decode(tmp_path: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A real process with `env` as its environment, recorded as decode[0] of local_inventory(tmp_path): final-health
    and the watch read its /proc environ. Killed when the block ends."""
    from pdctl.services.pidfile import parse_proc_stat_starttime

    proc = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    try:
        ticks = parse_proc_stat_starttime(Path(f"/proc/{proc.pid}/stat").read_text())
        state = tmp_path / "remote-state"
        state.mkdir()
        (state / "pdctl-local-decode-0.pid").write_text(json.dumps({"pid": proc.pid, "start_ticks": ticks}) + "\n")
        yield proc
    finally:
        proc.kill()
        proc.wait()
