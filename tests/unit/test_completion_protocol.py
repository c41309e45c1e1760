"""A TAB end to end: a real `pdctl` process run with typer's shell completion protocol in its environment, as the
script `pdctl --show-completion` installs does, for each kind of value (layers, heal modes, storm targets, roles and
instances and pairs of the inventory on the line or in $PDCTL_INVENTORY, the roles of `logs`, playbooks), with the
candidates it prints checked. No timing here: bench/bench_completion.py measures it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pdctl.checks.layers import LAYERS
from pdctl.playbook.schema import shipped_playbooks

from tests.unit.test_completion_values import TWO_DECODES


@pytest.fixture
def place(tmp_path):
    """A working directory holding the two-decode inventory and a playbook file of one's own."""
    (tmp_path / "two.yaml").write_text(TWO_DECODES)
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "night.yaml").write_text("name: night\n")
    return tmp_path


def _env(place, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_PDCTL_", "COMP_", "_TYPER_"))}
    env.pop("PDCTL_INVENTORY", None)
    return {**env, "XDG_STATE_HOME": str(place / "state"), "HOME": str(place), **extra}


def bash_tab(place, line: str, **env: str) -> list[str]:
    """What bash's completion function gets for `line` with the cursor at its end: typer's bash protocol."""
    words = line.split(" ")
    run = subprocess.run(
        [sys.executable, "-m", "pdctl"],
        env=_env(place, _PDCTL_COMPLETE="complete_bash", COMP_WORDS=line, COMP_CWORD=str(len(words) - 1), **env),
        cwd=place,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and not run.stderr, run.stderr
    return run.stdout.split()


def test_the_installed_script_speaks_this_protocol(place):
    run = subprocess.run(
        [sys.executable, "-m", "pdctl", "--show-completion", "bash"],
        env=_env(place),
        cwd=place,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "_PDCTL_COMPLETE=complete_bash" in run.stdout and "COMP_WORDS" in run.stdout and "COMP_CWORD" in run.stdout


@pytest.mark.parametrize(
    "line, want",
    [
        ("pdctl verify final-health --layer ", [x.name for x in LAYERS]),
        ("pdctl verify final-health --layer health,e", ["health,e2e"]),
        ("pdctl verify final-health --layer health --layer e", ["e2e"]),
        ("pdctl watch --heal ", ["off", "dry", "on"]),
        ("pdctl watch --heal=d", ["dry"]),
        ("pdctl storm --target ", ["random", "transfer-window"]),
        ("pdctl logs ", ["prefill", "decode", "router"]),
        ("pdctl restart --role d", ["decode"]),
        # no -i: the embedded default, one of each
        ("pdctl lint --role ", ["prefill", "prefill[0]", "decode", "decode[0]", "router", "router[0]"]),
        # -i on the line: its roles and instances, never a host contacted (10.0.0.x are not reachable from here)
        (
            "pdctl lint -i two.yaml --role ",
            ["prefill", "prefill[0]", "decode", "decode[0]", "decode[1]", "router", "router[0]"],
        ),
        ("pdctl render --inventory two.yaml --role decode", ["decode", "decode[0]", "decode[1]"]),
        ("pdctl logs -i two.yaml decode --index ", ["0", "1"]),
        ("pdctl restart -i two.yaml --rolling --first-pair ", ["0,0", "0,1"]),
        ("pdctl run books/", ["books/night.yaml"]),
    ],
)
def test_each_kind_of_value_completes(place, line, want):
    assert bash_tab(place, line) == want


def test_run_completes_the_shipped_playbooks_and_the_files_here(place):
    (place / "mine.yaml").write_text("name: mine\n")
    # every *.yaml here: a file is not opened to tell a playbook from an inventory (two.yaml)
    assert bash_tab(place, "pdctl run ") == [*shipped_playbooks(), "mine.yaml", "two.yaml"]
    assert bash_tab(place, "pdctl run co") == [n for n in shipped_playbooks() if n.startswith("co")]


def test_the_inventory_from_the_environment_as_the_command_would_use_it(place):
    got = bash_tab(place, "pdctl lint --role decode", PDCTL_INVENTORY=str(place / "two.yaml"))
    assert got == ["decode", "decode[0]", "decode[1]"]


def test_an_inventory_that_does_not_load_still_completes_the_roles(place):
    (place / "bad.yaml").write_text("roles: [broken\n")
    assert bash_tab(place, "pdctl lint -i bad.yaml --role ") == ["prefill", "decode", "router"]


def test_commands_and_option_names_still_complete(place):
    assert "storm" in bash_tab(place, "pdctl ") and "final-health" in bash_tab(place, "pdctl verify ")
    assert "--target" in bash_tab(place, "pdctl storm --t")


def test_zsh_gets_each_value_with_what_it_is(place):
    run = subprocess.run(
        [sys.executable, "-m", "pdctl"],
        env=_env(place, _PDCTL_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="pdctl lint -i two.yaml --role "),
        cwd=place,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert '"decode[1]":"gpu-2\\\\:30002"' in run.stdout, run.stdout
    assert '"decode":"every decode (2)"' in run.stdout, run.stdout
