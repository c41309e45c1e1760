"""Prefill against decode on what the KV transfer needs: lint's judge_pair over the parsed args and the flags
layer's live judge over /server_info share one field table (pdctl.checks.pd_compat)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.checks.lint_report import RoleAnswer, judge_lint
from pdctl.checks.lint_safety import judge_pair
from pdctl.checks.pd_compat import judge_live_pairs
from pdctl.checks.result import Status
from pdctl.role_ref import RoleRef

#: what the parser makes of a default line (SGLang 0.5.23's prepare_server_args, the keys the table reads)
BASE = {
    "model_path": "/models/m",
    "tokenizer_path": None,
    "page_size": None,
    "kv_cache_dtype": "auto",
    "dtype": "auto",
    "tp_size": 1,
    "dp_size": 1,
    "enable_dp_attention": False,
    "disaggregation_transfer_backend": "mooncake",
}
REAL = Path("/work/shared/reference/real-sglang-cpu")


def _pair(prefill: dict, decode: dict, versions=("0.5.23", "0.5.23")):
    return judge_pair(
        [
            ("prefill[0]@gpu1:30000", "prefill", {**BASE, **prefill}, versions[0]),
            ("decode[0]@gpu2:30000", "decode", {**BASE, **decode}, versions[1]),
        ]
    )


def test_a_page_size_difference_is_one_blocking_finding_naming_both_values():
    (f,) = _pair({"page_size": 16}, {"page_size": 64})
    assert (f.rule, f.severity, f.blocks, f.subject) == ("pd-mismatch", "error", True, "--page-size")
    assert f.message == "page_size: prefill[0] has 16, decode[0] has 64"
    assert f.role == "prefill[0]@gpu1:30000 / decode[0]@gpu2:30000" and f.fix == "give both the same --page-size"


def test_every_prefill_decode_pair_is_judged():
    workers = [
        ("prefill[0]", "prefill", {**BASE, "page_size": 16}, ""),
        ("prefill[1]", "prefill", {**BASE, "page_size": 64}, ""),
        ("decode[0]", "decode", {**BASE, "page_size": 64}, ""),
        ("decode[1]", "decode", {**BASE, "page_size": 16}, ""),
    ]
    assert sorted(f.role for f in judge_pair(workers)) == ["prefill[0] / decode[0]", "prefill[1] / decode[1]"]


def test_kv_cache_dtype_auto_is_compared_as_the_dtype_it_follows():
    (f,) = _pair({"dtype": "float16"}, {"dtype": "float16", "kv_cache_dtype": "bfloat16"})
    assert (f.rule, f.subject) == ("pd-mismatch", "--kv-cache-dtype")
    assert f.message == "kv_cache_dtype: prefill[0] has auto (follows --dtype float16), decode[0] has bfloat16"
    assert _pair({"dtype": "bfloat16"}, {"dtype": "bfloat16", "kv_cache_dtype": "bf16"}) == []  # one type, 2 names
    # auto against an explicit type is what the model's config.json says: not judged (it would block a good pair)
    assert _pair({}, {"kv_cache_dtype": "bfloat16"}) == []


def test_dtype_differs():
    (f,) = _pair({"dtype": "float16"}, {"dtype": "bfloat16"})  # both kv cache dtypes auto: said once, by --dtype
    assert f.subject == "--dtype" and f.message == "dtype: prefill[0] has float16, decode[0] has bfloat16"
    assert _pair({"dtype": "half"}, {"dtype": "float16"}) == []


def test_the_tokenizer_defaults_to_the_model_path():
    assert _pair({"tokenizer_path": "/models/m"}, {}) == []
    (f,) = _pair({"tokenizer_path": "/tok/other"}, {})
    assert f.subject == "--tokenizer-path"
    assert (
        f.message
        == "tokenizer_path: prefill[0] has /tok/other, decode[0] has /models/m (the model path: --tokenizer-path unset)"
    )


def test_model_and_transfer_backend():
    out = _pair({"model_path": "/models/a"}, {"model_path": "/models/b", "disaggregation_transfer_backend": "nixl"})
    assert [(f.rule, f.subject, f.blocks) for f in out] == [
        ("pd-mismatch", "--model-path", True),  # the tokenizers follow their model paths: said once
        ("transfer-backend-mismatch", "--disaggregation-transfer-backend", True),
    ]
    assert out[0].message == "model_path: prefill[0] has /models/a, decode[0] has /models/b"
    assert "mooncake" in out[1].message and "nixl" in out[1].message


def test_all_equal_is_quiet_and_a_missing_or_unset_field_is_not_judged():
    assert _pair({}, {}) == []
    assert _pair({"page_size": 16}, {}) == []  # unset: SGLang's default follows the attention backend at start
    decode = {k: v for k, v in BASE.items() if k not in ("page_size", "dtype", "kv_cache_dtype")}
    assert (
        judge_pair(
            [
                ("prefill[0]", "prefill", {**BASE, "page_size": 16, "dtype": "float16"}, ""),
                ("decode[0]", "decode", decode, ""),
            ]
        )
        == []
    )


def test_a_different_tp_is_a_silenceable_warning():
    (f,) = _pair({"tp_size": 1}, {"tp_size": 4})
    assert (f.rule, f.severity, f.blocks, f.subject) == ("pd-tp-differs", "warning", False, "--tp-size")
    assert f.message == "tp_size: prefill[0] has 1, decode[0] has 4"
    # DP attention: the attention TP is tp / dp, what SGLang reslices
    assert _pair({"tp_size": 4}, {"tp_size": 8, "dp_size": 2, "enable_dp_attention": True}) == []
    answers = [
        RoleAnswer(
            label, role, "sglang", "h", "py", [], {}, {"available": True, "verdict": {"ok": True}, "parsed": parsed}
        )
        for label, role, parsed in (
            ("prefill[0]", "prefill", {**BASE, "enable_metrics": True, "tp_size": 1}),
            ("decode[0]", "decode", {**BASE, "enable_metrics": True, "tp_size": 4}),
        )
    ]
    report = judge_lint(answers, site_env={}, silenced=[("pd-tp-differs", None, "MHA model")], probe_timeout=30.0)
    tp = [f for f in report.findings if f.rule == "pd-tp-differs"]
    assert len(tp) == 1 and tp[0].silenced == "MHA model" and not report.blocking


def _info(**kw) -> dict:
    return {**BASE, "page_size": 1, "version": "0.5.23", **kw}


def test_the_live_judge_fails_each_differing_field_naming_both_values():
    rows = judge_live_pairs(
        {
            RoleRef("prefill", 0): _info(page_size=16),
            RoleRef("decode", 0): _info(page_size=64, disaggregation_transfer_backend="nixl"),
        }
    )
    assert [(r.layer, r.target, r.name, r.status) for r in rows] == [
        ("flags", "prefill[0] / decode[0]", "--page-size", Status.FAIL),
        ("flags", "prefill[0] / decode[0]", "--disaggregation-transfer-backend", Status.FAIL),
    ]
    assert rows[0].observed == "page_size: prefill[0] has 16, decode[0] has 64"
    assert rows[0].next_step and "--page-size" in rows[0].detail


def test_the_live_judge_passes_an_agreeing_pair_once_and_skips_a_silent_worker():
    infos = {RoleRef("prefill", 0): _info(), RoleRef("decode", 0): _info(), RoleRef("decode", 1): None}
    (row,) = judge_live_pairs(infos)
    assert (row.target, row.status) == ("prefill[0] / decode[0]", Status.PASS)
    assert row.detail == (
        "prefill/decode agree on model, tokenizer, page size, kv cache dtype, dtype, transfer backend"
    )
    # a differing TP is lint's warning, not a live failure
    assert [r.status for r in judge_live_pairs({**infos, RoleRef("decode", 0): _info(tp_size=4)})] == [Status.PASS]


def test_the_bundled_engines_unset_page_size_is_its_effective_one():
    bundled = {**BASE, "page_size": None, "page_size_effective": 64}
    (row,) = judge_live_pairs({RoleRef("prefill", 0): bundled, RoleRef("decode", 0): {**bundled, "page_size": 64}})
    assert row.status is Status.PASS and "page size" in row.detail
    (row,) = judge_live_pairs({RoleRef("prefill", 0): bundled, RoleRef("decode", 0): _info(page_size=16)})
    assert row.status is Status.FAIL and row.observed == "page_size: prefill[0] has 64, decode[0] has 16"


@pytest.mark.skipif(not REAL.is_dir(), reason="no captures of real SGLang's /server_info")
def test_real_sglang_server_info_reports_every_field_the_live_judge_reads():
    docs = {
        RoleRef(role, 0): json.loads((REAL / f"sglang-0.5.23-cpu-pd-{role}-server_info.json").read_text())
        for role in ("prefill", "decode")
    }
    (row,) = judge_live_pairs(docs)
    assert row.status is Status.PASS and len(row.data["compared"]) == 6
    docs[RoleRef("decode", 0)] = {**docs[RoleRef("decode", 0)], "page_size": 16}
    (row,) = judge_live_pairs(docs)
    assert row.observed == "page_size: prefill[0] has 1, decode[0] has 16"
