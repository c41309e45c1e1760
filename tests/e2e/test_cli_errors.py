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


def _clean_refusal(r, *needles):
    assert r.code == 2, r.output
    for n in needles:
        assert n in r.stderr, r.output
    assert "Traceback" not in r.output and "pdctl bug" not in r.output


def test_unreadable_input_files_exit_2_naming_the_file_without_hanging(tmp_path):
    import os

    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: a\nroles: {}\nname: b\n")
    for path, needle in [(latin, "byte offset 9"), (binary, "not UTF-8"), (fifo, "FIFO"),
                         ("/dev/zero", "device"), (dup, "duplicate key 'name'")]:
        r = pdctl(["status", "-i", str(path)], state=tmp_path, timeout=30)
        _clean_refusal(r, str(path), needle)


def test_out_of_range_numeric_options_exit_2_naming_the_option(tmp_path):
    for args, option in [(["verify", "inflight", "--window", "inf"], "--window"),
                         (["triage", "--interval", "nan"], "--interval"),
                         (["logs", "prefill", "-n", "99999999999999999999"], "--lines"),
                         (["storm", "--max-new-tokens", "-3"], "--max-new-tokens"),
                         (["storm", "--window", "inf"], "--watch (--window)")]:
        r = pdctl(args, state=tmp_path, timeout=30)
        _clean_refusal(r, option)


def test_deploy_with_a_bad_env_name_or_value_exits_2_and_starts_nothing(tmp_path):
    import socket

    from tests.e2e.helpers import local_inventory, write_inventory
    from tests.fixtures.net import free_port

    ports = {k: free_port() for k in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    for decode_env, needle in [({"A;touch x": "1"}, "'A;touch x'"), ({"CUDA_VISIBLE_DEVICES": [1, 2]}, "[1, 2]")]:
        state = tmp_path / needle.strip("'[]; ").replace(" ", "_").replace(",", "")
        state.mkdir()
        inv = write_inventory(state / "inv.yaml", local_inventory("badenv", ports, decode_env=decode_env))
        r = pdctl(["deploy", "-i", str(inv), "--no-verify"], state=state, timeout=60)
        _clean_refusal(r, str(inv), "roles.decode.0.env", needle)
        # refused at load: prefill (first in the start order) was never launched, no pidfile, no listener
        assert list(state.rglob("*.pid")) == [] and not (state / "pdctl").exists()
        for port in ports.values():
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0
