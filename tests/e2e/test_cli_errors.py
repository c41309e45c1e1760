"""Bad input gets a clear error naming the file and field, a distinct exit code and no traceback."""

from __future__ import annotations

from tests.e2e.helpers import pdctl


def test_malformed_inventory_exits_2_naming_the_field(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("roles:\n  prefill: [{port: 30000}]\n  decode: [{port: notaport}]\n  router: [{port: 30001}]\n")
    r = pdctl(["verify", "final-health", "-i", str(inv)], state=tmp_path)
    assert r.code == 2
    assert str(inv) in r.stderr and "roles.decode.0.port" in r.stderr
    assert "Traceback" not in r.output


def test_missing_inventory_file_exits_2(tmp_path):
    r = pdctl(["deploy", "-i", str(tmp_path / "absent.yaml")], state=tmp_path)
    assert r.code == 2 and "absent.yaml" in r.stderr


def test_bad_usage_exits_2(tmp_path):
    r = pdctl(["restart"], state=tmp_path)
    assert r.code == 2 and "--pair" in r.stderr
    r = pdctl(["restart", "--role", "cache"], state=tmp_path)
    assert r.code == 2 and "cache" in r.stderr
    r = pdctl(["verify", "final-health", "--layer", "vibes"], state=tmp_path)
    assert r.code == 2 and "vibes" in r.stderr


def test_dry_run_deploy_of_seed_inventory_prints_the_sglang_commands(tmp_path):
    # Nothing is reachable: the plan of a remote inventory needs its host, so this shows the local render instead.
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from tests.e2e.helpers import REPO

    inv = load_inventory(REPO / "examples" / "seed-production.yaml")
    cmd = " ".join(launch.role_argv(inv, "decode", 0))
    assert "sglang.launch_server" in cmd and "--disable-overlap-schedule" in cmd


def test_help_is_fast_path_without_heavy_imports():
    import subprocess
    import sys

    code = ("import sys, pdctl.cli.app; heavy = [m for m in ('httpx', 'paramiko', 'fabric', 'torch', 'pydantic') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
