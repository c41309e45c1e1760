"""Prefill against decode: the settings the KV transfer needs both to agree on. One field table, read by
`pdctl lint` (each worker's parsed server args, defaults included: lint_safety.judge_pair) and by final-health's
flags layer (each live worker's /server_info: `judge_live_pairs`). Both use SGLang's ServerArgs attribute names.

A field missing from either document, or None there (a default the engine resolves at start, such as SGLang's
--page-size, which follows the attention backend), is not judged: the live check sees the resolved value. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pdctl.checks.lint_rules import RULES
from pdctl.checks.result import NEXT_DEPLOY, CheckResult, Status
from pdctl.role_ref import RoleRef

LAYER = "flags"


@dataclass(frozen=True)
class PairField:
    key: str  # SGLang's ServerArgs attribute, as the parser and /server_info name it
    flag: str
    rule: str  # the lint rule a difference fires
    words: str  # how the passing row names it


#: SGLang 0.5.23 refuses a page size or resolved KV cache dtype mismatch at the first transfer
#: (disaggregation/common/conn.py), a different backend never connects, a different model, tokenizer or dtype makes
#: the decode compute on KV it cannot read right; a different attention TP is resliced for standard attention only
FIELDS: tuple[PairField, ...] = (
    PairField("model_path", "--model-path", "pd-mismatch", "model"),
    PairField("tokenizer_path", "--tokenizer-path", "pd-mismatch", "tokenizer"),
    PairField("page_size", "--page-size", "pd-mismatch", "page size"),
    PairField("kv_cache_dtype", "--kv-cache-dtype", "pd-mismatch", "kv cache dtype"),
    PairField("dtype", "--dtype", "pd-mismatch", "dtype"),
    PairField(
        "disaggregation_transfer_backend",
        "--disaggregation-transfer-backend",
        "transfer-backend-mismatch",
        "transfer backend",
    ),
    PairField("tp_size", "--tp-size", "pd-tp-differs", "attention TP"),
)
#: the live check says only what fails a transfer: a differing TP is lint's (silenceable) warning
LIVE_RULES = ("pd-mismatch", "transfer-backend-mismatch")

#: spellings SGLang's --dtype / --kv-cache-dtype accept for one type
_ALIASES = {"half": "float16", "fp16": "float16", "float": "float32", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Value:
    value: Any  # what is compared
    shown: str  # what the message says
    model_dependent: bool = False  # "auto": the model's config.json decides, which neither side's args tell
    follows: str = ""  # left unset, so this other field's value: when both sides follow it, that field says it


def _dtype(doc: Mapping[str, Any], key: str = "dtype") -> Value | None:
    raw = doc.get(key)
    if raw is None:
        return None
    v = _ALIASES.get(str(raw), str(raw))
    return Value(v, str(raw), model_dependent=v == "auto")


def _kv_cache_dtype(doc: Mapping[str, Any]) -> Value | None:
    if doc.get("kv_cache_dtype") != "auto":
        return _dtype(doc, "kv_cache_dtype")
    dt = _dtype(doc)  # SGLang resolves a kv cache dtype "auto" to the model's dtype
    if dt is None:
        return None
    return Value(dt.value, f"auto (follows --dtype {dt.shown})", dt.model_dependent, follows="dtype")


def _tokenizer(doc: Mapping[str, Any]) -> Value | None:
    raw, model = doc.get("tokenizer_path"), doc.get("model_path")
    if raw is not None:
        return Value(raw, str(raw))
    if "tokenizer_path" not in doc or model is None:
        return None
    return Value(model, f"{model} (the model path: --tokenizer-path unset)", follows="model_path")


def _attention_tp(doc: Mapping[str, Any]) -> Value | None:
    tp, dp = doc.get("tp_size"), doc.get("dp_size") or 1
    if not isinstance(tp, int):
        return None
    if doc.get("enable_dp_attention") and isinstance(dp, int) and dp > 1:  # each DP rank attends on tp / dp
        return Value(tp // dp, f"{tp // dp} (--tp-size {tp} / --dp-size {dp}, DP attention)")
    return Value(tp, str(tp))


def _page_size(doc: Mapping[str, Any]) -> Value | None:
    raw = doc.get("page_size")
    if raw is None:
        raw = doc.get("page_size_effective")  # the bundled engine: args None, its own default in use
    return None if raw is None else Value(raw, str(raw))


_RESOLVE = {
    "dtype": _dtype,
    "kv_cache_dtype": _kv_cache_dtype,
    "tokenizer_path": _tokenizer,
    "tp_size": _attention_tp,
    "page_size": _page_size,
}


def effective(doc: Mapping[str, Any], key: str) -> Value | None:
    """The value a worker runs `key` with, or None when it cannot be told from `doc`."""
    if key in _RESOLVE:
        return _RESOLVE[key](doc)
    raw = doc.get(key)
    return None if raw is None else Value(raw, str(raw))


@dataclass(frozen=True)
class Difference:
    field: PairField
    prefill: Value
    decode: Value

    def message(self, prefill: str, decode: str) -> str:
        """'page_size: prefill[0] has 16, decode[0] has 64'."""
        return f"{self.field.key}: {prefill} has {self.prefill.shown}, {decode} has {self.decode.shown}"

    @property
    def fix(self) -> str:
        return f"give both the same {self.field.flag}"


def compare(
    prefill: Mapping[str, Any], decode: Mapping[str, Any], fields: Sequence[PairField] = FIELDS
) -> tuple[list[Difference], list[PairField]]:
    """(the fields that differ, the fields compared at all). "auto" against an explicit dtype is not judged: the
    model's config decides what auto is. A field both sides leave to another (the tokenizer to the model path) is
    said once, by that field."""
    diffs, compared = [], []
    for f in fields:
        p, d = effective(prefill, f.key), effective(decode, f.key)
        if p is None or d is None or (p.model_dependent != d.model_dependent):
            continue
        compared.append(f)
        if p.value != d.value and not (p.follows and p.follows == d.follows):
            diffs.append(Difference(f, p, d))
    return diffs, compared


def judge_live_pairs(infos: Mapping[RoleRef, Mapping[str, Any] | None]) -> list[CheckResult]:
    """Every prefill x decode pair whose two /server_info documents were read: a FAIL row per field they disagree
    on, naming both values, or one PASS row saying what they agree on. A pair with a silent worker has no row (the
    health layer says it is down)."""
    fields = [f for f in FIELDS if f.rule in LIVE_RULES]
    docs = {ref: doc for ref, doc in infos.items() if isinstance(doc, Mapping)}
    out: list[CheckResult] = []
    for p_ref in sorted(r for r in docs if r.role == "prefill"):
        for d_ref in sorted(r for r in docs if r.role == "decode"):
            p, d = p_ref.short, d_ref.short
            diffs, compared = compare(docs[p_ref], docs[d_ref], fields)
            out += [_failed(p, d, x) for x in diffs]
            if not diffs and compared:
                out.append(
                    CheckResult(
                        LAYER,
                        f"{p} / {d}",
                        "prefill/decode compatibility",
                        Status.PASS,
                        observed="agree",
                        expected="the same on both",
                        detail=f"prefill/decode agree on {', '.join(f.words for f in compared)}",
                        data={"kind": "pd-compat", "compared": [f.key for f in compared]},
                    )
                )
    return out


def _failed(p: str, d: str, x: Difference) -> CheckResult:
    return CheckResult(
        LAYER,
        f"{p} / {d}",
        x.field.flag,
        Status.FAIL,
        observed=x.message(p, d),
        expected="the same on both",
        detail=f"{RULES[x.field.rule].reason}; {x.fix}",
        data={"kind": "pd-compat", "key": x.field.key, "prefill": x.prefill.value, "decode": x.decode.value},
        next_step=NEXT_DEPLOY,
    )
