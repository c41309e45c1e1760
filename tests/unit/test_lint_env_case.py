"""An env name in another letter case than the one SGLang reads (issue 28, W12): lint said nothing about
`sglang_disaggregation_waiting_timeout`, which SGLang silently ignores. The registry here is the bundled engine's
real one (engine/env_registry.py, as the probe reports it) plus a direct read, as SGLang's probe reports those."""

from __future__ import annotations


from pdctl.checks.lint import judge_env
from tests.unit.lint_probe_reply import probe_reply

WAIT = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"


def _registry(env_names: list[str]) -> dict:
    """The bundled engine's registry, from the real probe run as pdctl runs it on a host."""
    return probe_reply(env_names=env_names)["registries"]["bundled"]


def test_a_lower_case_name_is_flagged_with_the_right_spelling():
    env = {"sglang_disaggregation_waiting_timeout": "100000"}
    (f,) = judge_env("decode[0]", "bundled", env, _registry(list(env)), {}, "0.5.23")
    assert (f.rule, f.severity, f.subject) == ("env-case", "error", "sglang_disaggregation_waiting_timeout")
    assert f.fails and f.fix == f"write {WAIT}" and f.data["spelling"] == WAIT and WAIT in f.message


def test_mixed_case_legacy_prefix_and_direct_reads_are_flagged_too():
    registry = {**_registry([]), "direct_reads": ["SGLANG_HOST_IP"]}
    env = {
        "SGLANG_Disaggregation_Waiting_Timeout": "60",  # the prefix right, the rest not
        "sgl_disaggregation_bootstrap_timeout": "60",  # the legacy prefix, lower case: pointed at the SGLANG_ name
        "sglang_host_ip": "10.0.0.1",  # a name SGLang reads directly, outside its registry
        WAIT: "60",  # the right spelling: nothing to say
        "omp_num_threads": "1",  # not SGLang's: left alone
    }
    got = {(f.rule, f.subject, f.data.get("spelling")) for f in judge_env("decode[0]", "bundled", env, registry, {})}
    assert got == {
        ("env-case", "SGLANG_Disaggregation_Waiting_Timeout", WAIT),
        ("env-case", "sgl_disaggregation_bootstrap_timeout", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"),
        ("env-case", "sglang_host_ip", "SGLANG_HOST_IP"),
    }


def test_an_upper_case_legacy_name_stays_deprecated_and_a_lower_case_typo_unknown():
    registry = _registry([])
    out = judge_env("decode[0]", "bundled", {"SGL_DISAGGREGATION_WAITING_TIMEOUT": "60"}, registry, {})
    assert [f.rule for f in out] == ["env-deprecated"]
    (f,) = judge_env("decode[0]", "bundled", {"sglang_disaggregation_waiting_timout": "60"}, registry, {})
    assert f.rule == "env-unknown" and f.data["suggestions"][0] == WAIT


def test_a_secret_value_under_a_wrong_case_name_is_not_shown():
    registry = {"fields": {"SGLANG_API_KEY": {"type": "EnvStr", "default": None}}, "deprecated": {}, "direct_reads": []}
    (f,) = judge_env("decode[0]", "sglang", {"sglang_api_key": "hunter2"}, registry, {})
    assert f.rule == "env-case" and "hunter2" not in f.message + f.fix
