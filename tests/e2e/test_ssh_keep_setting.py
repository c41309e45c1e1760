"""$PDCTL_SSH_KEEP is refused unless 0 (off) or 5 to 86400 seconds (issue 28, W10): `PDCTL_SSH_KEEP=0.001` made a
keeper end between the requests of one run and failed healthy final-health runs. Refused before any host is
reached: exit 2, the variable named, one JSON document with --json, no traceback."""

from __future__ import annotations

import pytest

from pdctl.errors import UsageError
from pdctl.transport.control import KEEP_ENV, MIN_KEEP_S, parse_keep
from tests.e2e.helpers import local_inventory, pdctl, write_inventory
from tests.fixtures.net import closed_port, free_port


@pytest.mark.parametrize("text", ["0.001", "1e-3", "4.99", "-0", "0.0", "5", "600", "86400", "inf", "nan", "86401"])
def test_keep_is_off_or_within_the_sane_range(text):
    value = float(text)
    if value == 0 or MIN_KEEP_S <= value <= 86400:
        assert parse_keep(text, KEEP_ENV) == value
        return
    with pytest.raises(UsageError) as e:
        parse_keep(text, KEEP_ENV)
    assert e.value.exit_code == 2 and f"PDCTL_SSH_KEEP={text!r}" in e.value.message
    assert "0 (off) or seconds from 5 to 86400" in e.value.message


def _ssh_inventory(tmp_path):
    host = {
        "transport": "ssh",
        "address": "127.0.0.1",
        "port": closed_port(),  # nothing is reached: the setting is refused first
        "connect_timeout": 2,
        "known_hosts": str(tmp_path / "kh"),
        "ssh_config": "none",
        "http": "tunnel",
    }
    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    return write_inventory(tmp_path / "inv.yaml", local_inventory("keep-setting", ports, host=host))


@pytest.mark.parametrize(
    "args, keep",
    [(["verify", "final-health"], "0.001"), (["status"], "0.5"), (["ssh"], "1e-3")],
)
def test_a_keep_too_short_is_refused_before_any_host_is_reached(tmp_path, args, keep):
    inv = _ssh_inventory(tmp_path)
    r = pdctl([*args, "-i", str(inv), "--json"], state=tmp_path, env={KEEP_ENV: keep}, timeout=60)
    err = r.json()["error"]  # one JSON document on stdout
    assert r.code == 2 and f"PDCTL_SSH_KEEP={keep!r}" in err["message"], r.output
    assert "Traceback" not in r.output and not (tmp_path / "kh").exists()
    screen = pdctl([*args, "-i", str(inv)], state=tmp_path, env={KEEP_ENV: keep, "COLUMNS": "80"}, timeout=60)
    assert screen.code == 2 and "PDCTL_SSH_KEEP" in screen.stderr and "Traceback" not in screen.output
