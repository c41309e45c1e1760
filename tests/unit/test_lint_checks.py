"""The lint judges as pure functions (the probe's answers built by hand; the real parsers answer in
tests/e2e/test_lint_real.py), the rule table against docs/lint.md, and the inventory's lint settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pdctl.checks.lint import effective_env, judge_command, judge_env, parse_probe_reply
from pdctl.checks.lint_report import RoleAnswer, judge_lint
from pdctl.checks.lint_rules import RULES
from pdctl.checks.lint_safety import judge_pair, judge_router, judge_worker_safety
from pdctl.errors import InventoryError
from pdctl.inventory import embedded_default, parse_inventory
from pdctl.serialize import to_data

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill", "--enable-metrics", "--tp-size", "--port"]
REGISTRY = {
    "fields": {
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": {"type": "EnvBool", "default": True, "alias": None},
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": {"type": "EnvInt", "default": 300, "alias": None},
        "SGLANG_NEW": {"type": "EnvInt", "default": 1, "alias": "SGLANG_OLD"},
    },
    "deprecated": {"SGLANG_GONE": {"replacement": None, "note": "removed."}},
    "direct_reads": ["SGLANG_HOST_IP"],
}


def _item(ok=True, error="", parsed=None):
    return {
        "available": True,
        "version": "0.5.23",
        "options": OPTIONS,
        "verdict": {"ok": ok, "error": error},
        "parsed": parsed or {},
    }


def test_the_reply_is_found_among_other_output():
    assert parse_probe_reply('noise\nPDCTL-LINT-REPLY {"items": []}\n') == {"items": []}
    assert parse_probe_reply("Traceback ...\n") is None
    assert parse_probe_reply("PDCTL-LINT-REPLY {broken") is None


def test_an_ambiguous_abbreviation_names_every_candidate_once():
    err = (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    )
    out = judge_command("decode[0]", "sglang", ["--cuda-graph-max-bs", "96"], _item(False, err))
    assert [f.rule for f in out] == ["flag-ambiguous"]
    f = out[0]
    assert f.data["candidates"] == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
    assert f.version == "0.5.23" and "0.5.23" in f.message and f.blocks
    assert f.data["parser_says"].startswith("ambiguous option")


def test_unknown_flags_are_all_reported_and_an_accepted_abbreviation_warned():
    out = judge_command(
        "decode[0]",
        "sglang",
        ["--tp-sise", "4", "--bogus", "--enable-m", "--port=1"],
        _item(False, "x: error: unrecognized arguments: --tp-sise 4 --bogus"),
    )
    assert [(f.rule, f.subject) for f in out] == [
        ("flag-unknown", "--tp-sise"),
        ("flag-unknown", "--bogus"),
        ("flag-abbreviated", "--enable-m"),
    ]
    assert out[0].data["suggestions"] == ["--tp-size"] and "--tp-size" in out[0].fix
    assert out[2].severity == "warning" and not out[2].blocks


def test_a_bad_value_is_the_parsers_own_words():
    err = "x: error: argument --tp-size: invalid int value: 'four'"
    out = judge_command("decode[0]", "sglang", ["--tp-size", "four"], _item(False, err))
    assert [(f.rule, f.subject) for f in out] == [("flag-value", "--tp-size")]
    assert "invalid int value" in out[0].message


def test_a_parser_that_could_not_be_asked_is_unavailable_not_a_rejection():
    out = judge_command(
        "decode[0]",
        "sglang",
        ["--tp-size", "4"],
        {"available": False, "unavailable": "ModuleNotFoundError: No module named 'sglang'"},
    )
    assert [f.rule for f in out] == ["lint-unavailable"] and not out[0].blocks and out[0].fails


def test_the_gate_says_each_role_it_could_not_lint_and_why():
    """deploy/restart go ahead past lint-unavailable (it does not block); the warning names the role and the reason,
    one line per role, and leaves out a role the inventory silences the rule for and every other rule."""
    from pdctl.checks.lint_report import LintReport
    from pdctl.checks.lint_rules import Finding
    from pdctl.checks.lint_report import unchecked_warnings

    why = "ModuleNotFoundError: No module named 'sglang.srt'"
    report = LintReport(
        [
            *judge_command(
                "prefill[0]@gpu1:30000", "sglang", ["--tp-size", "4"], {"available": False, "unavailable": why}
            ),
            Finding("lint-unavailable", "decode[0]@gpu1:30002", "sglang", f"sglang could not be asked: {why}"),
            Finding("lint-unavailable", "decode[0]@gpu1:30002", "env registry", "the env registry could not be read"),
            Finding(
                "lint-unavailable", "decode[1]@gpu2:30002", "sglang", "not asked", silenced="no sglang there, known"
            ),
            Finding("flag-abbreviated", "router[0]@gpu1:8998", "--health", "an abbreviation"),
        ]
    )
    assert unchecked_warnings(report, "restart") == [
        f"lint could not check prefill[0]@gpu1:30000: sglang could not be asked: {why}; restart went ahead without "
        "checking its command line",
        f"lint could not check decode[0]@gpu1:30002: sglang could not be asked: {why}; the env registry could not be "
        "read; restart went ahead without checking its command line",
    ]
    assert unchecked_warnings(LintReport([], skipped=True), "deploy") == []


def test_env_names_against_the_registry():
    env = {
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAPP": "0",
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "soon",
        "SGLANG_OLD": "2",
        "SGLANG_GONE": "1",
        "SGLANG_HOST_IP": "10.0.0.1",
        "SGL_NEW": "3",
        "SGLANG_SITE_ONLY": "512",
        "OMP_NUM_THREADS": "1",
    }
    out = judge_env("decode[0]", "sglang", env, REGISTRY, {"SGLANG_SITE_ONLY": "our patched build"}, "0.5.23")
    got = {(f.rule, f.subject) for f in out}
    assert got == {
        ("env-unknown", "SGLANG_OPT_USE_MULTI_STREAM_OVERLAPP"),
        ("env-value", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"),
        ("env-deprecated", "SGLANG_OLD"),
        ("env-deprecated", "SGLANG_GONE"),
        ("env-deprecated", "SGL_NEW"),
        ("env-site-specific", "SGLANG_SITE_ONLY"),
    }
    unknown = next(f for f in out if f.rule == "env-unknown")
    assert unknown.data["suggestions"][0] == "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"
    site = next(f for f in out if f.rule == "env-site-specific")
    assert "our patched build" in site.message and not site.fails


def test_a_secret_env_value_is_masked_in_a_finding():
    reg = {"fields": {"SGLANG_API_KEY": {"type": "EnvInt", "default": None}}, "deprecated": {}, "direct_reads": []}
    out = judge_env("decode[0]", "sglang", {"SGLANG_API_KEY": "hunter2"}, reg, {})
    assert out and all("hunter2" not in f.message for f in out)


def test_a_secret_flag_value_the_parser_echoes_is_masked():
    err = "x: error: argument --tp-size: invalid int value: 'hunter2'"
    answers = [
        RoleAnswer(
            "decode[0]",
            "decode",
            "sglang",
            "h",
            "py",
            ["--api-key", "hunter2", "--tp-size", "hunter2"],
            {},
            {**_item(False, err), "options": [*OPTIONS, "--api-key"]},
        )
    ]
    doc = to_data(judge_lint(answers, site_env={}, silenced=[], probe_timeout=30.0))
    assert "hunter2" not in str(doc) and doc["findings"][0]["rule"] == "flag-value"


def test_safety_nets_fire_on_the_effective_values():
    env = {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "100000"}
    assert effective_env("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", {}, REGISTRY) == 300
    out = judge_worker_safety("decode[0]", env, {"enable_metrics": False, "tp_size": 4}, REGISTRY)
    assert [f.rule for f in out] == ["waiting-timeout", "metrics-off", "tp-rank0-metrics"]
    assert judge_worker_safety("decode[0]", {}, {"enable_metrics": True, "tp_size": 1}, REGISTRY) == []


def test_router_window_and_timeout_order():
    parsed = {"health_check_interval_secs": 60, "health_failure_threshold": 3, "request_timeout_secs": 1800}
    out = judge_router("router[0]", parsed, 30.0, [("decode[0]", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 100000.0)])
    assert [f.rule for f in out] == ["router-health-window", "timeout-order"]
    assert out[0].data["window"] == 180
    assert judge_router("router[0]", {**parsed, "health_check_interval_secs": 2}, 30.0, []) == []
    slow_back = {**parsed, "health_check_interval_secs": 20, "health_success_threshold": 2}
    out = judge_router("router[0]", slow_back, 60.0, [], restart_window=30.0)
    assert [(f.rule, f.subject) for f in out] == [("router-health-window", "--health-success-threshold")]


# sglang-router 0.3.2's defaults (router_args.py): what `parsed` holds when the router's flags leave them alone
ROUTER_DEFAULTS = {
    "health_check_interval_secs": 2,
    "health_failure_threshold": 3,
    "health_success_threshold": 2,
    "request_timeout_secs": 1800,
    "cb_failure_threshold": 10,
    "cb_success_threshold": 3,
    "cb_timeout_duration_secs": 60,
    "cb_window_duration_secs": 120,
    "disable_circuit_breaker": False,
}
BOOT, WAIT = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"


def _order(parsed=None, timeouts=(), probe=30.0, restart=300.0):
    return [
        f
        for f in judge_router(
            "router[0]", {**ROUTER_DEFAULTS, **(parsed or {})}, probe, list(timeouts), "0.3.2", restart_window=restart
        )
        if f.rule == "timeout-order"
    ]


def test_timeout_order_quiet_on_sglang_and_router_defaults():
    assert _order(timeouts=[("prefill[0]", BOOT, 300.0), ("decode[0]", WAIT, 300.0)]) == []


def test_timeout_order_adds_bootstrap_then_waiting_against_the_request_timeout():
    # each alone is below the router's 1800 s; a room can be stuck through both phases: 1000 + 1000 s
    timeouts = [("prefill[0]", BOOT, 1000.0), ("prefill[1]", BOOT, 400.0), ("decode[0]", WAIT, 1000.0)]
    (f,) = _order(timeouts=timeouts)
    assert f.severity == "warning" and f.subject == "--request-timeout-secs" and f.version == "0.3.2"
    assert f.data["engine_deadline"] == 2000 and f.data["request_timeout"] == 1800
    assert [p["worker"] for p in f.data["phases"]] == ["prefill[0]", "decode[0]"]  # Bootstrapping, then waiting
    assert f.message.index(BOOT) < f.message.index(WAIT) and "2000" in f.fix
    assert _order({"request_timeout_secs": 2001}, timeouts) == []
    # a disabled timeout adds nothing here: waiting-timeout / bootstrap-timeout say it
    assert _order(timeouts=[("prefill[0]", BOOT, 0.0), ("decode[0]", WAIT, 1000.0)]) == []


def test_timeout_order_probe_against_the_request_timeout():
    (f,) = _order({"request_timeout_secs": 30})
    assert f.subject == "final_health.probe.timeout"
    assert _order({"request_timeout_secs": 31}) == []


def test_timeout_order_circuit_breaker_against_the_restart_window():
    (f,) = _order({"cb_timeout_duration_secs": 600}, restart=300.0)
    assert f.subject == "--cb-timeout-duration-secs" and f.data == {"open_s": 600, "restart_window": 300.0}
    assert _order({"cb_timeout_duration_secs": 300}, restart=300.0) == []
    assert _order({"cb_timeout_duration_secs": 600}, restart=None) == []  # no declared window: nothing to compare
    (off,) = _order({"disable_circuit_breaker": True, "cb_timeout_duration_secs": 600})
    assert off.subject == "--disable-circuit-breaker" and off.fails


def test_timeout_order_in_judge_lint_takes_the_prefills_bootstrap_and_the_decodes_waiting():
    reg = {
        "fields": {BOOT: {"type": "EnvInt", "default": 300}, WAIT: {"type": "EnvInt", "default": 300}},
        "deprecated": {},
        "direct_reads": [],
    }

    def answer(label, role, kind, env, parsed):
        return RoleAnswer(label, role, kind, "h", "py", [], env, _item(parsed=parsed), reg)

    def lint(prefill_env, decode_env):
        answers = [
            answer("prefill[0]", "prefill", "sglang", prefill_env, {"enable_metrics": True}),
            answer("decode[0]", "decode", "sglang", decode_env, {"enable_metrics": True}),
            answer("router[0]", "router", "router", {}, ROUTER_DEFAULTS),
        ]
        rep = judge_lint(answers, site_env={}, silenced=[], probe_timeout=30.0, restart_windows={"router[0]": 300.0})
        return [f for f in rep.findings if f.rule == "timeout-order"]

    (f,) = lint({BOOT: "900"}, {WAIT: "900"})
    assert f.data["engine_deadline"] == 1800
    # a prefill's waiting and a decode's bootstrap timeout bound no room: 300 + 300 stays under 1800
    assert lint({WAIT: "1700"}, {BOOT: "1700"}) == []


def _safety(env):
    reg = {
        "fields": {
            BOOT: {"type": "EnvInt", "default": 300},
            WAIT: {"type": "EnvInt", "default": 300},
            "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": {"type": "EnvFloat", "default": 5.0},
            "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": {"type": "EnvInt", "default": 2},
        },
        "deprecated": {},
        "direct_reads": [],
    }
    return judge_worker_safety("prefill[0]", env, {"enable_metrics": True, "tp_size": 1}, reg, "0.5.23")


@pytest.mark.parametrize("value", ["100000", "0"])
def test_bootstrap_timeout_off_or_huge_fires(value):
    (f,) = _safety({BOOT: value})
    assert (f.rule, f.severity, f.subject, f.version) == ("bootstrap-timeout", "warning", BOOT, "0.5.23")
    assert _safety({BOOT: "600"}) == [] and _safety({}) == []


@pytest.mark.parametrize("interval, misses", [("60", "10"), ("0", "2")])
def test_heartbeat_window_off_or_huge_fires(interval, misses):
    env = {"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": interval, "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": misses}
    (f,) = _safety(env)
    assert (f.rule, f.severity) == ("heartbeat-window", "warning")
    assert f.data["window"] == float(interval) * float(misses)
    assert (
        _safety({"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "10", "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "3"})
        == []
    )


def test_transfer_backend_and_version_mismatch_fire_per_pair():
    def worker(label, role, backend, version):
        return (label, role, {"disaggregation_transfer_backend": backend}, version)

    out = judge_pair(
        [worker("prefill[0]", "prefill", "mooncake", "0.5.23"), worker("decode[0]", "decode", "nixl", "0.5.22")]
    )
    assert [(f.rule, f.severity, f.role) for f in out] == [
        ("transfer-backend-mismatch", "error", "prefill[0] / decode[0]"),
        ("version-mismatch", "warning", "prefill[0] / decode[0]"),
    ]
    assert "mooncake" in out[0].message and "nixl" in out[0].message
    assert out[0].blocks and not out[1].blocks  # no transfer can succeed: deploy/restart refuse the pair
    assert "0.5.23" in out[1].message and "0.5.22" in out[1].message
    assert (
        judge_pair([worker("prefill[0]", "prefill", "nixl", "0.5.23"), worker("decode[0]", "decode", "nixl", "0.5.23")])
        == []
    )


def test_a_validation_refusal_is_flag_rejected_and_blocks():
    err = "ValueError: --tp-size 3 must divide the number of attention heads"  # as the probe says a raise
    out = judge_command("decode[0]", "sglang", ["--tp-size", "3"], _item(False, err))
    assert [(f.rule, f.severity, f.subject) for f in out] == [("flag-rejected", "error", "command line")]
    assert out[0].blocks and "must divide" in out[0].message and out[0].version == "0.5.23"
    assert judge_command("decode[0]", "sglang", ["--tp-size", "4"], _item(True)) == []


def test_silenced_rules_show_their_reason_and_do_not_fail():
    answers = [
        RoleAnswer(
            "router[0]",
            "router",
            "router",
            "h",
            "py",
            [],
            {},
            _item(parsed={"health_check_interval_secs": 60, "health_failure_threshold": 3}),
        )
    ]
    loud = judge_lint(answers, site_env={}, silenced=[], probe_timeout=30.0)
    assert not loud.ok and [f.rule for f in loud.findings] == ["router-health-window"]
    quiet = judge_lint(
        answers, site_env={}, silenced=[("router-health-window", "router", "lab cluster")], probe_timeout=30.0
    )
    assert quiet.ok and quiet.findings[0].silenced == "lab cluster"
    assert to_data(quiet)["findings"][0]["silenced"] == "lab cluster"


def test_every_rule_has_a_section_in_the_docs():
    text = (ROOT / "docs" / "lint.md").read_text()
    anchors = set(re.findall(r"^### `([a-z0-9-]+)`", text, re.M))
    assert anchors == set(RULES)
    for rule in RULES.values():
        assert rule.severity in ("error", "warning", "note") and rule.reason


def _with_lint(lint: dict):
    data = embedded_default().dump()
    data["lint"] = lint
    return parse_inventory(data, "inv.yaml")


def test_inventory_lint_settings():
    inv = _with_lint(
        {
            "site_env": {"SGLANG_X": "patched build"},
            "silence": [{"rule": "tp-rank0-metrics", "reason": "one GPU per rank is fine"}],
        }
    )
    assert inv.lint.site_env == {"SGLANG_X": "patched build"} and inv.lint.silence[0].role is None
    for bad, words in (
        ({"silence": [{"rule": "nope", "reason": "x"}]}, "unknown lint rule"),
        ({"silence": [{"rule": "flag-unknown", "reason": "x"}]}, "cannot be silenced"),
        ({"silence": [{"rule": "pd-mismatch", "reason": "x"}]}, "cannot be silenced"),
        ({"silence": [{"rule": "metrics-off"}]}, "reason"),
        ({"site_env": {"SGLANG_X": " "}}, "give the reason"),
    ):
        with pytest.raises(InventoryError, match=words):
            _with_lint(bad)
