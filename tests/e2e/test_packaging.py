"""A wheel install (not the editable checkout) carries what pdctl needs at run time: the shipped playbooks and
the engine's tokenizer directory that sglang-router loads from `model_path`."""

from __future__ import annotations

import json
import subprocess
import sys
import venv

import pytest

from tests.e2e.helpers import REPO

pytestmark = pytest.mark.e2e


def test_wheel_install_finds_shipped_playbooks_and_engine_assets(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (whl,) = wheels.glob("pdctl-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(whl)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "import json, os, pdctl, engine.assets as a; from pdctl.playbook.schema import shipped_playbooks; "
        "d = os.path.join(os.path.dirname(a.__file__), 'tiny-byte-lm'); "
        "print(json.dumps({'pdctl': pdctl.__file__, 'playbooks': sorted(shipped_playbooks()), "
        "'tokenizer': os.path.exists(os.path.join(d, 'tokenizer.json'))}))"
    )
    out = json.loads(
        subprocess.run(
            [str(py), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60
        ).stdout
    )
    assert str(env_dir) in out["pdctl"]  # the wheel's copy, not the checkout
    assert {"final-health", "co-restart", "stall-triage", "abort-storm-ab", "deploy-fix"} <= set(out["playbooks"])
    assert out["tokenizer"]
