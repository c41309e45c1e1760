"""A value from an inventory or the audit log cannot drive the terminal: control characters are shown escaped on
the screen (as the SSH banner of a host is), a newline does not split a line, and --json keeps the exact value."""

from __future__ import annotations

import json

from tests.e2e.helpers import pdctl, write_inventory
from tests.fixtures.net import free_port

CONTROL = ("\x1b", "\r", "\x07")


def test_render_escapes_env_values_and_keeps_them_exact_in_json(tmp_path):
    env = {"X": "line1\nline2", "ESC": "\x1b[31mred", "PLAIN": "a b"}
    inv = write_inventory(
        tmp_path / "inv.yaml",
        {
            "name": "esc",
            "roles": {
                "prefill": [{"host": "local", "port": free_port()}],
                "decode": [{"host": "local", "port": free_port(), "env": env}],
                "router": [{"host": "local", "port": free_port()}],
            },
        },
    )
    r = pdctl(["render", "--role", "decode", "-i", str(inv)], state=tmp_path / "state")
    assert r.code == 0, r.output
    assert not any(ch in r.stdout for ch in CONTROL), repr(r.stdout)
    env_lines = [line for line in r.stdout.splitlines() if line.startswith("  env: ")]
    assert len(env_lines) == 1, r.stdout
    # quoted like the command line, in bash's $'...' form: pasted into bash it sets exactly the declared value
    assert "X=$'line1\\nline2'" in env_lines[0] and "ESC=$'\\x1b[31mred'" in env_lines[0], env_lines[0]
    assert "PLAIN='a b'" in env_lines[0], env_lines[0]
    assert not any(line.startswith("line2") for line in r.stdout.splitlines())  # it did not start a line

    j = pdctl(["render", "--role", "decode", "-i", str(inv), "--json"], state=tmp_path / "state")
    assert j.code == 0, j.output
    assert {k: v for k, v in j.json()["roles"][0]["env"].items() if k in env} == env


def test_history_escapes_every_field_of_a_record(tmp_path):
    state = tmp_path / "state"
    log = state / "pdctl" / "audit.jsonl"
    log.parent.mkdir(parents=True)
    record = {
        "time": "2025-01-01T00:00:00+0000",
        "operator": "\x1b[2Jmallory",
        "inventory": "inv\x1b]0;t\x07.yaml",
        "action": "down\rX",
        "args": {},
        "result": "failed: \x1b[31mboom",
        "duration_s": 1.0,
    }
    log.write_text(json.dumps(record) + "\n")
    r = pdctl(["history"], state=state)
    assert r.code == 0, r.output
    assert not any(ch in r.stdout for ch in CONTROL), repr(r.stdout)
    assert "\\x1b[2Jmallory" in r.stdout and "down\\rX" in r.stdout and "\\x1b[31mboom" in r.stdout, r.stdout

    narrow = pdctl(["history"], state=state, env={"COLUMNS": "40"})  # the one-block-per-record screen too
    assert narrow.code == 0, narrow.output
    assert not any(ch in narrow.stdout for ch in CONTROL), repr(narrow.stdout)

    j = pdctl(["history", "--json"], state=state)
    assert j.json()["records"][0]["operator"] == record["operator"]


def test_a_servers_answer_cannot_drive_the_terminal(tmp_path):
    """A worker whose /health fails with an error body holding ESC sequences (clear screen, set the window title):
    final-health shows them escaped on the screen; --json keeps the bytes it read."""
    from http.server import BaseHTTPRequestHandler

    from tests.e2e.helpers import local_inventory
    from tests.fixtures.http_servers import serving
    from tests.fixtures.net import closed_port

    body = b"\x1b[2J\x1b]0;pwned\x07\rover\xe2\x80\xa8loaded " * 4

    class Hostile(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Hostile) as (srv, _):
        ports = {
            "prefill": srv.server_address[1],
            "decode": closed_port(),
            "router": closed_port(),
            "bootstrap": free_port(),
            "prometheus": free_port(),
        }
        inv = write_inventory(tmp_path / "inv.yaml", local_inventory("hostile", ports))
        r = pdctl(["verify", "final-health", "--layer", "health", "-i", str(inv)], state=tmp_path / "state")
        j = pdctl(["verify", "final-health", "--layer", "health", "-i", str(inv), "--json"], state=tmp_path / "state")
        narrow = pdctl(
            ["verify", "final-health", "--layer", "health", "-i", str(inv)],
            state=tmp_path / "state",
            env={"COLUMNS": "80"},
        )
    assert r.code == 1, r.output
    assert not any(ch in r.stdout + r.stderr for ch in CONTROL), repr(r.stdout)
    # each escaped, none dropped: BEL and CR too (rich's own text handling drops them silently)
    assert "\\x1b[2J\\x1b]0;pwned\\x07\\rover\\u2028loaded" in r.stdout, r.stdout
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines()), narrow.stdout  # escaped before layout
    prefill = next(c for c in j.json()["layers"]["health"] if c["target"].startswith("prefill[0]"))
    assert "\x1b[2J" in prefill["observed"] + prefill["detail"], prefill  # the exact answer, for a machine
