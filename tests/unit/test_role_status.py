"""`pdctl status`'s rows: RoleStatus's state (an unknown host is never stopped) and the --json row of each kind,
key for key and in order, as the dict rows printed before the type existed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pdctl.checks.role_status import RoleStatus
from pdctl.errors import UnreachableError
from pdctl.ops import lifecycle
from pdctl.serialize import to_data
from pdctl.services.base import ServiceStatus

REACHED_KEYS = "label role index host service active state pid started_at uptime_s detail restarts".split()
UNKNOWN_KEYS = "label role index host service active state pid uptime_s detail error_exit_code error hint".split()


def _dep(statuses: dict[tuple[str, int], ServiceStatus | Exception]):
    """The little of a Deployment that ops.lifecycle.status reads."""

    def status(role, i):
        st = statuses[(role, i)]
        if isinstance(st, Exception):
            raise st
        return st

    inv = SimpleNamespace(
        label=lambda r, i: f"{r}[{i}]@h{i}:3000{i}", service_name=lambda r, i: f"pdctl-{r}-{i}.service"
    )
    return SimpleNamespace(
        inv=inv,
        instance=lambda r, i: SimpleNamespace(host=f"h{i}"),
        status=status,
        each_instance=lambda fn: [SimpleNamespace(value=fn(r, i), error=None) for r, i in statuses],
    )


def test_each_kind_of_row_keeps_its_json_keys_in_order(monkeypatch):
    monkeypatch.setattr(lifecycle.time, "time", lambda: 1000.0)
    dep = _dep(
        {
            ("prefill", 0): ServiceStatus("p", True, 41, 900.0, "active (running)", 2),
            ("decode", 0): ServiceStatus("d", False, None, None, "failed", 0),
            ("decode", 1): UnreachableError("ssh h1:22: timed out\nmore", target="h1", hint="check the host"),
            ("router", 0): ServiceStatus("r", True, 43, 990.0, "running", None),
        }
    )
    rows = lifecycle.status(dep)
    assert [r.state for r in rows] == ["running", "stopped", "unknown", "running"]
    docs = to_data(rows)
    assert [list(d) for d in docs] == [REACHED_KEYS, REACHED_KEYS, UNKNOWN_KEYS, REACHED_KEYS]
    assert docs[0] == {
        "label": "prefill[0]@h0:30000",
        "role": "prefill",
        "index": 0,
        "host": "h0",
        "service": "pdctl-prefill-0.service",
        "active": True,
        "state": "running",
        "pid": 41,
        "started_at": 900.0,
        "uptime_s": 100.0,
        "detail": "active (running)",
        "restarts": 2,
    }
    assert docs[1]["started_at"] is None and docs[3]["restarts"] is None  # a reached row's keys are always there
    assert docs[2] == {
        "label": "decode[1]@h1:30001",
        "role": "decode",
        "index": 1,
        "host": "h1",
        "service": "pdctl-decode-1.service",
        "active": False,
        "state": "unknown",
        "pid": None,
        "uptime_s": None,
        "detail": "ssh h1:22: timed out",
        "error_exit_code": 3,
        "error": "ssh h1:22: timed out\nmore",
        "hint": "check the host",
    }
    json.dumps(docs)  # what --json prints


def test_an_unknown_row_keeps_a_missing_hint_as_null():
    row = RoleStatus("d[0]", "decode", 0, "h", "s", active=False, error_exit_code=4, error="refused")
    assert list(to_data(row)) == UNKNOWN_KEYS and to_data(row)["hint"] is None


@pytest.mark.parametrize(
    ("active", "error", "state"), [(True, None, "running"), (False, None, "stopped"), (False, "timed out", "unknown")]
)
def test_state_follows_active_and_error(active, error, state):
    assert RoleStatus("d[0]", "decode", 0, "h", "s", active=active, error=error).state == state


def test_a_host_that_could_not_be_asked_has_no_service_facts():
    with pytest.raises(ValueError, match="could not be asked"):
        RoleStatus("d[0]", "decode", 0, "h", "s", active=True, error="timed out")


def test_no_lineage_is_judged_while_a_host_could_not_be_asked():
    rows = [
        RoleStatus("p[0]", "prefill", 0, "h0", "s", active=True, pid=1, started_at=1.0),
        RoleStatus("d[0]", "decode", 0, "h1", "s", active=False, error_exit_code=3, error="timed out"),
    ]
    assert lifecycle.status_hazards(SimpleNamespace(), rows) == []  # the dep is never read: no record, no judge
