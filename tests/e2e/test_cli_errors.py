"""Bad input gets a clear error naming the file and field, a distinct exit code and no traceback."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import REPO, pdctl


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


def test_an_empty_inventory_path_is_called_empty_not_a_directory(tmp_path):
    r = pdctl(["status", "-i", ""], state=tmp_path)
    assert r.code == 2 and "the path is empty" in r.stderr and "directory" not in r.stderr, r.output
    j = pdctl(["status", "-i", "", "--json"], state=tmp_path)
    assert j.code == 2 and "the path is empty" in j.json()["error"]["message"]


def test_bad_usage_exits_2(tmp_path):
    r = pdctl(["restart"], state=tmp_path)
    assert r.code == 2 and "--pair" in r.stderr
    r = pdctl(["restart", "--role", "cache"], state=tmp_path)
    assert r.code == 2 and "cache" in r.stderr
    r = pdctl(["verify", "final-health", "--layer", "vibes"], state=tmp_path)
    assert r.code == 2 and "vibes" in r.stderr
    for bad in ("nan", "inf", "-1"):  # nan never times out: a drain that never ends
        r = pdctl(["restart", "--rolling", "--drain-timeout", bad, "--dry-run"], state=tmp_path)
        assert r.code == 2 and "--drain-timeout" in r.stderr and "finite" in r.stderr, r.output


def test_dry_run_deploy_of_seed_inventory_prints_the_sglang_commands(tmp_path):
    # Nothing is reachable: the plan of a remote inventory needs its host, so this shows the local render instead.
    from pdctl import launch
    from pdctl.inventory import load_inventory
    from tests.e2e.helpers import REPO

    inv = load_inventory(REPO / "examples" / "seed-production.yaml")
    cmd = " ".join(launch.role_argv(inv, "decode", 0))
    assert "sglang.launch_server" in cmd and "--disable-overlap-schedule" in cmd


HEAVY = ("rich", "typer.rich_utils", "httpx", "paramiko", "fabric", "torch", "pydantic", "yaml", "prometheus_client")
#: The packages outside the standard library that `pdctl ... --help` may load, and how many of their modules. When
#: this fails, the message lists what loaded: a package belongs here only if it is light (see
#: `python3 -X importtime -m pdctl --help`); then add it, and raise the bound by the modules it brings.
ON_HELP_PATH = {"pdctl", "typer", "annotated_doc", "shellingham"}
MAX_NON_STDLIB_MODULES = 60  # pdctl's command modules (20 today) and typer's own (30)


def _modules_loaded(tmp_path, args: list[str] | None) -> set[str]:
    """sys.modules when `python -m pdctl ARGS` exits (args None: `python -c pass`, for what the interpreter loads
    by itself, e.g. .pth files); importtime misses modules loaded through importlib."""
    import os
    import subprocess
    import sys

    out = tmp_path / "modules.txt"
    code = (
        "import atexit, sys; path = sys.argv[1]; "
        "atexit.register(lambda: open(path, 'w').write(chr(10).join(sys.modules)))"
    )
    if args is not None:
        code += "; import runpy; sys.argv[1:] = sys.argv[2:]; runpy.run_module('pdctl', run_name='__main__')"
    subprocess.run(
        [sys.executable, "-c", code, str(out), *(args or [])],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    return set(out.read_text().split())


@pytest.mark.parametrize("args", [["--help"], ["verify", "final-health", "--help"], ["storm", "--help"]], ids=" ".join)
def test_help_is_fast_path_without_heavy_imports(tmp_path, args):
    import sys

    loaded = _modules_loaded(tmp_path, args) - _modules_loaded(tmp_path, None)
    assert "pdctl.cli.help_format" in loaded  # the help was drawn: the subprocess got that far
    assert sorted(m for m in loaded for h in HEAVY if m == h or m.startswith(h + ".")) == []
    foreign = sorted(m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names)
    assert {m.split(".")[0] for m in foreign} <= ON_HELP_PATH, foreign
    assert len(foreign) <= MAX_NON_STDLIB_MODULES, foreign


def test_a_commands_help_loads_that_command_only(tmp_path):
    loaded = _modules_loaded(tmp_path, ["storm", "--help"])
    assert sorted(m for m in loaded if m.startswith("pdctl.cli.")) == [
        "pdctl.cli.app",
        "pdctl.cli.common",
        "pdctl.cli.complete_values",  # the TAB hooks of storm's options: standard library only at import
        "pdctl.cli.help_format",
        "pdctl.cli.lazy_commands",
        "pdctl.cli.storm",
    ]


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
    for path, needle in [
        (latin, "byte offset 9"),
        (binary, "not UTF-8"),
        (fifo, "FIFO"),
        ("/dev/zero", "device"),
        (dup, "duplicate key 'name'"),
    ]:
        r = pdctl(["status", "-i", str(path)], state=tmp_path, timeout=30)
        _clean_refusal(r, str(path), needle)


def test_out_of_range_numeric_options_exit_2_naming_the_option(tmp_path):
    for args, option in [
        (["verify", "inflight", "--window", "inf"], "--window"),
        (["triage", "--interval", "nan"], "--interval"),
        (["logs", "prefill", "-n", "99999999999999999999"], "--lines"),
        (["storm", "--max-new-tokens", "-3"], "--max-new-tokens"),
        (["storm", "--window", "inf"], "--watch (--window)"),
    ]:
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
