"""systemd: unit rendering (checked by `systemd-analyze verify`) and parsing captured `systemctl show` output."""

from __future__ import annotations

import calendar
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pdctl.services.base import ServiceSpec
from pdctl.services.systemd import (
    parse_systemctl_show,
    parse_systemd_timestamp,
    render_unit,
    status_from_show,
    systemd_environment_line,
    systemd_exec_line,
    systemd_quote_arg,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"
PY = sys.executable


def _bundled_prefill() -> ServiceSpec:
    return ServiceSpec(
        name="pdctl-local-prefill-0",
        argv=(
            PY,
            "-m",
            "engine.launch_server",
            "--disaggregation-mode",
            "prefill",
            "--port",
            "30000",
            "--disaggregation-bootstrap-port",
            "8998",
            "--served-model-name",
            "pdctl tiny 'x'",
        ),
        env={
            "PDCTL_NOTE": "has spaces, \"double\" and 'single' quotes, $HOME, ${X} and 100%",
            "PLAIN": "1",
            "BACKSLASH": "a\\b",
        },
        workdir=os.getcwd(),
        description="pdctl bundled prefill [0]",
    )


def _sglang_decode() -> ServiceSpec:
    return ServiceSpec(
        name="sglang-decode",
        argv=(
            PY,
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/models/Qwen3",
            "--port",
            "30002",
            "--disaggregation-mode",
            "decode",
            "--disaggregation-transfer-backend",
            "nixl",
            "--disable-overlap-schedule",
            "--cuda-graph-max-bs-decode",
            "96",
        ),
        env={"SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0", "SGLANG_SM120_MMA_TARGET_CTAS": "512"},
        description="SGLang decode",
    )


def _router() -> ServiceSpec:
    return ServiceSpec(
        name="sglang-router",
        argv=(
            PY,
            "-m",
            "sglang_router.launch_router",
            "--pd-disaggregation",
            "--prefill",
            "http://127.0.0.1:30000",
            "8998",
            "--decode",
            "http://127.0.0.1:30002",
            "--host",
            "127.0.0.1",
            "--port",
            "30001",
        ),
        description="SGLang PD router",
    )


def test_quote_arg_rules():
    assert systemd_quote_arg("--port") == "--port"
    assert systemd_quote_arg("96") == "96"
    assert systemd_quote_arg("a b") == '"a b"'
    assert systemd_quote_arg("$HOME") == '"$$HOME"'
    assert systemd_quote_arg("50%") == "50%%"
    assert systemd_quote_arg('say "hi"') == '"say \\"hi\\""'
    assert systemd_quote_arg("a\\b") == '"a\\\\b"'
    assert systemd_quote_arg("") == '""'
    assert systemd_quote_arg(";") == "\\;"
    assert systemd_quote_arg("-x", first=True) == '"-x"'


def test_exec_line_needs_absolute_path():
    with pytest.raises(ValueError):
        systemd_exec_line(["python3", "-V"])


def test_environment_line_quotes_and_validates_names():
    assert systemd_environment_line("A", 'x "y" $Z 5%') == 'Environment="A=x \\"y\\" $Z 5%%"'
    with pytest.raises(ValueError):
        systemd_environment_line("BAD NAME", "x")


def test_render_decode_unit_has_every_section():
    text = render_unit(_sglang_decode())
    assert "After=network-online.target" in text
    assert "--disable-overlap-schedule --cuda-graph-max-bs-decode 96" in text
    assert 'Environment="SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0"' in text
    for line in (
        "Restart=on-failure",
        "RestartSec=5",
        "KillMode=mixed",
        "TimeoutStopSec=30",
        "WantedBy=multi-user.target",
        "Description=SGLang decode",
    ):
        assert line in text.splitlines()
    assert render_unit(_sglang_decode(), restart="always").count("Restart=always") == 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("spec", [_bundled_prefill(), _sglang_decode(), _router()], ids=lambda s: s.name)
def test_rendered_units_pass_systemd_analyze_verify(spec, tmp_path):
    unit = tmp_path / f"{spec.name}.service"
    unit.write_text(render_unit(spec))
    res = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    # verify prints warnings about the host's own units too; only lines about our unit matter
    ours = [ln for ln in (res.stdout + res.stderr).splitlines() if spec.name in ln]
    assert res.returncode == 0 and not ours, res.stdout + res.stderr


def test_parse_systemctl_show_active_capture():
    # captured from a live systemd by tests/fixtures/capture_systemctl.py (a seed-like decode unit)
    show = parse_systemctl_show((FIX / "show_active.txt").read_text())
    assert show["MainPID"] == show["ExecMainPID"] != "0"
    assert show["ActiveState"] == "active" and show["SubState"] == "running"
    assert show["ExecMainStartTimestampMonotonic"].isdigit()
    # values holding '=' keep everything after the first one; systemd quotes a value with a space
    assert show["Environment"] == 'SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0 "NCCL_DEBUG=WARN INIT"'
    assert show["ExecStart"].startswith("{ path=/") and "--disaggregation-mode decode" in show["ExecStart"]
    st = status_from_show("sglang-decode", show)
    assert st.active and st.main_pid == int(show["MainPID"]) and st.restarts == 0
    assert st.started_at == parse_systemd_timestamp(show["ExecMainStartTimestamp"]) is not None
    assert st.detail == "active/running"


def test_parse_systemctl_show_auto_restart_is_not_active():
    show = parse_systemctl_show((FIX / "show_auto_restart.txt").read_text())
    st = status_from_show("sglang-decode", show)
    assert not st.active and st.main_pid is None and st.started_at is None
    assert "auto-restart" in st.detail and "Result=signal" in st.detail
    assert st.restarts == 1  # the second kill: systemd restarted it once so far


def test_parse_systemctl_show_after_restarts_by_systemd():
    before = parse_systemctl_show((FIX / "show_active.txt").read_text())
    show = parse_systemctl_show((FIX / "show_restarted.txt").read_text())
    st = status_from_show("sglang-decode", show)
    assert st.active and st.restarts == 2 and st.main_pid != int(before["MainPID"])
    assert int(show["ExecMainStartTimestampMonotonic"]) > int(before["ExecMainStartTimestampMonotonic"])


def test_parse_systemctl_show_inactive_and_not_found():
    st = status_from_show("sglang-decode", parse_systemctl_show((FIX / "show_inactive.txt").read_text()))
    assert not st.active and st.detail == "inactive/dead" and st.restarts == 0  # a stop resets NRestarts
    st = status_from_show("pdctl-nope", parse_systemctl_show((FIX / "show_not_found.txt").read_text()))
    assert not st.active and "not-found" in st.detail


def test_parse_systemd_timestamp():
    assert parse_systemd_timestamp("Tue 2025-03-11 09:41:07 UTC") == calendar.timegm((2025, 3, 11, 9, 41, 7, 0, 0, 0))
    assert parse_systemd_timestamp("Tue 2025-03-11 10:41:07 +01:00") == calendar.timegm(
        (2025, 3, 11, 9, 41, 7, 0, 0, 0)
    )
    assert parse_systemd_timestamp("Tue 2025-03-11 09:41:07 CET") is None
    assert parse_systemd_timestamp("") is None


def test_rendered_unit_carries_its_spec_for_change_reports():
    from pdctl.services.base import spec_changes
    from pdctl.services.systemd import spec_from_unit

    spec = _sglang_decode()
    back = spec_from_unit(spec.name, render_unit(spec))
    assert back == spec
    assert spec_from_unit(spec.name, "[Service]\nExecStart=/bin/true\n") is None
    changed = type(spec)(
        spec.name, spec.argv + ("--enable-metrics",), {**spec.env, "EXTRA": "1"}, spec.workdir, spec.description
    )
    assert spec_changes(back, changed) == ["command: +--enable-metrics", "env: +EXTRA=1"]


def test_the_inventory_declares_the_restart_policy_pdctl_renders(tmp_path):
    from pdctl.errors import InventoryError
    from pdctl.inventory import load_inventory
    from pdctl.services.connect import service_manager

    inv_path = tmp_path / "inv.yaml"
    roles = "roles: {prefill: [{port: 30000}], decode: [{port: 30002}], router: [{port: 30001}]}\n"
    inv_path.write_text("hosts: {local: {service_manager: systemd, systemd_restart: no}}\n" + roles)
    host = load_inventory(inv_path).hosts["local"]  # a bare YAML `no` is the policy, not false
    mgr = service_manager(host, transport=None)
    assert "Restart=no" in mgr._render(_sglang_decode()).splitlines()
    inv_path.write_text("hosts: {local: {service_manager: systemd}}\n" + roles)
    assert service_manager(load_inventory(inv_path).hosts["local"], None).restart_policy == "on-failure"
    inv_path.write_text("hosts: {local: {systemd_restart: always}}\n" + roles)
    with pytest.raises(InventoryError, match=r"systemd_restart: only service_manager: systemd"):
        load_inventory(inv_path)
