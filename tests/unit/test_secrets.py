from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pdctl.secrets import MASK, is_secret_name, mask_argv, mask_env, mask_text, mask_value, secret_values


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "hf_token",
        "AWS_SECRET_ACCESS_KEY",
        "API_KEY",
        "--api-key",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GITHUB_AUTH",
        "Authorization",
        "--admin-api-key",
        "MY_PASSWD",
        "WANDB_API_KEY",
        "HUGGING_FACE_HUB_TOKEN",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP",
        "SGLANG_SM120_MMA_TARGET_CTAS",
        "PATH",
        "--max-total-tokens",
        "--tokenizer-path",
        "SGLANG_MAX_TOKENS",
        "--disable-overlap-schedule",
        "CUDA_VISIBLE_DEVICES",
        "--cuda-graph-max-bs-decode",
    ],
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_mask_env_and_value():
    env = {"HF_TOKEN": "hf_secret", "SGLANG_SM120_MMA_TARGET_CTAS": "512", "API_KEY": "", "X": "1"}
    assert mask_env(env) == {"HF_TOKEN": MASK, "SGLANG_SM120_MMA_TARGET_CTAS": "512", "API_KEY": "", "X": "1"}
    assert env["HF_TOKEN"] == "hf_secret"  # a copy
    assert mask_value("hf_secret") == MASK
    assert mask_value("512", "SGLANG_SM120_MMA_TARGET_CTAS") == "512"
    assert mask_value("x", "HF_TOKEN") == MASK
    assert mask_value(None, "HF_TOKEN") is None
    assert mask_env(None) == {}


def test_mask_argv():
    argv = [
        "env",
        "HF_TOKEN=hf_secret",
        "python3",
        "-m",
        "sglang.launch_server",
        "--api-key",
        "sk-123",
        "--admin-api-key=adm-9",
        "--max-total-tokens",
        "4096",
        "--disable-overlap-schedule",
        "--port",
        "30002",
    ]
    assert mask_argv(argv) == [
        "env",
        f"HF_TOKEN={MASK}",
        "python3",
        "-m",
        "sglang.launch_server",
        "--api-key",
        MASK,
        f"--admin-api-key={MASK}",
        "--max-total-tokens",
        "4096",
        "--disable-overlap-schedule",
        "--port",
        "30002",
    ]
    assert secret_values({"HF_TOKEN": "hf_secret", "A": "b"}, argv) == {"hf_secret", "sk-123", "adm-9"}


def test_mask_text_scrubs_values_assignments_and_flags():
    log = (
        "loading with token hf_secret from HF_TOKEN=hf_secret\n"
        "cmd: python -m sglang.launch_server --api-key sk-123 --port 30000 --api-key=sk-456\n"
        "export AWS_SECRET_ACCESS_KEY='abc def' PATH=/usr/bin\n"
        "max_total_tokens=4096"
    )
    out = mask_text(log, ["hf_secret", "1"])
    assert "hf_secret" not in out and "sk-123" not in out and "sk-456" not in out and "abc def" not in out
    assert "--port 30000" in out and "PATH=/usr/bin" in out and "max_total_tokens=4096" in out
    assert f"--api-key {MASK}" in out and f"AWS_SECRET_ACCESS_KEY={MASK}" in out
    assert mask_text("", ["x"]) == ""


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=4, max_size=40),
    st.text(max_size=80),
    st.text(max_size=80),
)
def test_known_secret_never_survives(secret, before, after):
    assert secret not in mask_text(before + secret + after, [secret]) or secret in MASK
