"""The bundled engine side by side with the real SGLang 0.5.23 (issue 25 item 6): one PD pair of each (prefill +
decode, mooncake over loopback, no router; tests/real/side_by_side_pairs.py), started once for the module, get the
same requests, and what pdctl and clients touch is compared:
- the metric families per mode (name, type, label names) after those requests, minus the explicit allow-list below,
  each entry with the reason docs/engine.md gives; a NEW difference fails;
- the /server_info keys pdctl reads (version, the engine's name) and the PD keys (disaggregation_mode,
  disaggregation_transfer_backend, bootstrap port, served_model_name), and no engine key SGLang does not have;
- /health, /health_generate, /model_info (status and keys), /v1/loads (its shape, key by key, with value types),
  /v1/models, and /version and /loads (404 on both);
- OpenAI chat: the answer's keys (choice, message, usage, metadata), finish_reason and matched_stop for max_tokens
  and for a stop string, the default temperature (sampled, not greedy, on both), the stream's chunk sequence (role
  chunk, content, finish chunk, usage chunk, [DONE]) and each chunk's keys, the error status and body of bad
  requests (chat and /generate);
- pdctl's pair canary (/generate with a bootstrap room, pdctl.checks.pairs) judged the same on both.
Known differences are asserted as documented (the prefill's own answer, a chat `n` > 1, which real SGLang's PD pair
never answers), so that a change on either side shows here.

Run time: 1.5 to 3 minutes on the shared 2-core machine (84 s measured with it quiet, 154 s and 185 s loaded), nearly
all of it the real pair's start; the requests take about 20 s, the n = 2 case 9 s (it waits for its timeout)."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json

import httpx
import pytest

from pdctl.checks.metrics import parse_metrics
from pdctl.checks.pairs import PASS, LegAnswer, canary_body, fresh_room, judge_pair
from tests.real.side_by_side_pairs import SERVED, pd_body, pd_post, pd_stream, started

pytestmark = [pytest.mark.engine, pytest.mark.real]

CHAT = "/v1/chat/completions"
MSGS = [{"role": "user", "content": "hello there"}]
ROLES = ("prefill", "decode")

# -- the allow-list: metric families real SGLang shows and the engine does not, each for the reason docs/engine.md
# ("Metrics" and "Where the bundled engine still differs") gives. Nothing else may differ, in either direction.
ABSENT_BOTH = {
    # no prefix (radix) cache
    "sglang:cache_hit_rate",
    "sglang:cached_tokens_total",
    "sglang:kv_evictable_tokens",
    # no hybrid attention (sliding-window or mamba pools)
    "sglang:swa_available_tokens",
    "sglang:swa_evictable_tokens",
    "sglang:swa_token_usage",
    "sglang:swa_used_tokens",
    "sglang:mamba_available_tokens",
    "sglang:mamba_evictable_tokens",
    "sglang:mamba_usage",
    "sglang:mamba_used_tokens",
    "sglang:prealloc_swa_token_usage",
    # no speculative decoding
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
    "sglang:spec_block_accept_length",
    "sglang:spec_cap_length",
    "sglang:spec_num_draft_tokens",
    "sglang:spec_num_steps",
    # no grammar / structured output
    "sglang:num_grammar_queue_reqs",
    # no retraction, no pause for weight sync, no new-token-ratio policy
    "sglang:num_retracted_reqs",
    "sglang:num_paused_reqs",
    "sglang:new_token_ratio",
    # no host-memory receive or deferred KV release on a decode (SGLang declares the gauges in both modes)
    "sglang:num_decode_host_receive_queue_reqs",
    "sglang:num_decode_deferred_kv_release_reqs",
    # no GPU, CUDA graphs, FLOP model, DP attention, routing keys, SLO
    "sglang:utilization",
    "sglang:fwd_occupancy",
    "sglang:is_cuda_graph",
    "sglang:cuda_graph_passes_total",
    "sglang:graph_memory_usage_gb",
    "sglang:startup_cuda_graph_time_seconds",
    "sglang:startup_available_gpu_memory_gb",
    "sglang:dp_attention_pairs_total",
    "sglang:dp_attention_steps_total",
    "sglang:dp_attention_sync_wait_seconds",
    "sglang:dp_attention_token_imbalance_ratio",
    "sglang:dp_attention_tokens_total",
    "sglang:num_unique_running_routing_keys",
    "sglang:routing_key_all_req_count",
    "sglang:routing_key_running_req_count",
    "sglang:routing_keys_active",
    # no per-stage scheduler-loop accounting, no HTTP middleware metrics, no tokenizer/detokenizer processes
    "sglang:scheduler_stage_seconds_total",
    "sglang:http_requests_total",
    "sglang:http_requests_active",
    "sglang:http_responses_total",
    "sglang:process_cpu_seconds_total",
}
ABSENT_IN_MODE = {
    "prefill": {
        # "Families a mode does not feed are not declared": SGLang sets the decode's gauges at 0 on a prefill
        "sglang:num_decode_prealloc_queue_reqs",
        "sglang:num_decode_transfer_queue_reqs",
        "sglang:pending_prealloc_token_usage",
        "sglang:prealloc_full_token_usage",
        "sglang:kv_transfer_alloc_ms",
        "sglang:gen_throughput",
        "sglang:decode_sum_seq_lens",
        # "A prefill counts no generated token" (SGLang's counts the first token it samples)
        "sglang:generation_tokens_total",
        "sglang:generation_tokens_histogram",
    },
    "decode": {
        # the prefill's queue gauges, at 0 on SGLang's decode; no prompt computed on a decode
        "sglang:num_prefill_bootstrap_queue_reqs",
        "sglang:num_prefill_inflight_queue_reqs",
        "sglang:prefill_effective_tokens_total",
        # shown on a Mooncake prefill only (SGLang shows it, at 0, on both sides)
        "sglang:failed_session_recoveries_total",
    },
}
# /server_info keys only the engine has: its own (docs/engine.md "Endpoints" and "Drills")
ENGINE_ONLY_INFO = {"engine", "drills", "page_size_effective", "config"}
# /model_info: SGLang's `embedding` (the serving plan of an embedding model) has no counterpart in the engine
REAL_ONLY_MODEL_INFO = {"embedding"}


def chat(**kw) -> dict:
    return {"model": SERVED, "messages": MSGS, **kw}


def stop_string(text: str) -> str:
    """A one-character stop string the greedy answer `text` meets after its start (an ASCII letter or digit if there
    is one), so that the same greedy request with it ends with finish_reason "stop" and a shorter content."""
    later = [c for i, c in enumerate(text) if i and text.find(c) == i and c.isascii() and c.strip()]
    return next((c for c in later if c.isalnum()), later[0] if later else text[:1])


def exchange(pair) -> dict:
    """The same requests, in the same order, to one pair; every answer, then both workers' /metrics."""
    a: dict = {"get": {}}
    for role in ROLES:
        base = getattr(pair, role)
        for path in (
            "/health",
            "/health_generate",
            "/model_info",
            "/server_info",
            "/v1/loads",
            "/v1/models",
            f"/v1/models/{SERVED}",
            "/v1/models/nope",
            "/version",
            "/loads",
        ):
            a["get"][role, path] = httpx.get(f"{base}{path}", timeout=60)
    a["length"] = pd_post(pair, CHAT, chat(max_tokens=6))
    a["greedy"] = pd_post(pair, CHAT, chat(max_tokens=8, temperature=0))
    a["stop_str"] = stop_string(a["greedy"][1].json()["choices"][0]["message"]["content"])
    a["stop"] = pd_post(pair, CHAT, chat(max_tokens=8, temperature=0, stop=[a["stop_str"]]))
    a["sampled"] = [pd_post(pair, CHAT, chat(max_tokens=8))[1] for _ in range(4)]
    a["stream_usage"] = pd_stream(pair, CHAT, chat(max_tokens=4, temperature=0, stream_options={"include_usage": True}))
    a["stream"] = pd_stream(pair, CHAT, chat(max_tokens=4, temperature=0))
    room = fresh_room()
    a["canary"] = pd_post(
        pair,
        "/generate",
        canary_body(
            prompt="hi", max_tokens=8, bootstrap_host="127.0.0.1", bootstrap_port=pair.bp, room=room, model=SERVED
        ),
    )
    a["canary_room"] = room
    a["bad"] = {name: pd_post(pair, path, body, timeout=30) for name, (path, body) in BAD.items()}
    a["metrics"] = {role: httpx.get(f"{getattr(pair, role)}/metrics", timeout=30).text for role in ROLES}
    return a


BAD = {  # malformed requests: both workers answer them at once (nothing reaches the scheduler)
    "no messages": (CHAT, {"model": SERVED, "max_tokens": 4}),
    "messages not a list": (CHAT, chat(messages="hi", max_tokens=4)),
    "max_tokens -1": (CHAT, chat(max_tokens=-1)),
    "generate without text": ("/generate", {"sampling_params": {"max_new_tokens": 2}}),
    "generate max_new_tokens -1": ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": -1}}),
}


@pytest.fixture(scope="module")
def pairs():
    yield from started()


@pytest.fixture(scope="module")
def answers(pairs):
    with cf.ThreadPoolExecutor(2) as ex:
        futures = {kind: ex.submit(exchange, pair) for kind, pair in pairs.items()}
        return {kind: f.result() for kind, f in futures.items()}


def families(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {n: (f.type, f.label_names) for n, f in parse_metrics(text).families().items()}


def shape(x):
    """A JSON value's keys and value types, all the way down (a list as the shape of its first item)."""
    if isinstance(x, dict):
        return {k: shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return [shape(x[0])] if x else []
    return type(x).__name__


@pytest.mark.parametrize("role", ROLES)
def test_metric_families_per_mode(answers, role):
    real, eng = families(answers["real"]["metrics"][role]), families(answers["engine"]["metrics"][role])
    allowed = ABSENT_BOTH | ABSENT_IN_MODE[role]
    missing = sorted(set(real) - set(eng) - allowed)
    assert not missing, f"{role}: real SGLang shows families the engine does not: {missing}"
    extra = sorted(set(eng) - set(real))
    assert not extra, f"{role}: the engine shows families real SGLang does not: {extra}"
    differ = {n: (real[n], eng[n]) for n in set(real) & set(eng) if real[n] != eng[n]}
    assert not differ, f"{role}: type or label names differ (real, engine): {differ}"
    # the allow-list holds no stale entry: each one is really shown by SGLang and not by the engine
    stale = sorted(n for n in ABSENT_IN_MODE[role] if n not in real or n in eng)
    assert not stale, f"{role}: allow-listed but not a difference (any more): {stale}"


def test_the_allow_list_holds_no_stale_entry(answers):
    """Each family allowed absent in both modes is shown by real SGLang in at least one of them."""
    shown = set().union(*(families(answers["real"]["metrics"][role]) for role in ROLES))
    assert not sorted(ABSENT_BOTH - shown)


@pytest.mark.parametrize("role", ROLES)
def test_server_info_keys_pdctl_reads(answers, pairs, role):
    real, eng = (answers[k]["get"][role, "/server_info"].json() for k in ("real", "engine"))
    assert real["version"] == "0.5.23" and eng["version"].startswith("0.5.23")  # pdctl's flags layer, lint
    assert "engine" not in real and eng["engine"] == "pdctl-bundled-cpu"  # judge_version's engine name
    for key in ("disaggregation_mode", "disaggregation_transfer_backend", "served_model_name"):
        assert real[key] == eng[key], key
    assert real["disaggregation_mode"] == role and real["disaggregation_transfer_backend"] == "mooncake"
    if role == "prefill":
        assert (real["disaggregation_bootstrap_port"], eng["disaggregation_bootstrap_port"]) == (
            pairs["real"].bp,
            pairs["engine"].bp,
        )
    assert isinstance(real["internal_states"], list) and isinstance(eng["internal_states"], list)
    # every flag the engine records is under SGLang's own key (its parser's dest, not the option's spelling)
    assert set(eng) - set(real) <= ENGINE_ONLY_INFO, sorted(set(eng) - set(real) - ENGINE_ONLY_INFO)


@pytest.mark.parametrize("role", ROLES)
def test_info_endpoints(answers, role):
    real, eng = answers["real"]["get"], answers["engine"]["get"]
    for path in ("/health", "/health_generate", "/version", "/loads", "/v1/models/nope"):
        assert eng[role, path].status_code == real[role, path].status_code, path
    assert real[role, "/health"].status_code == real[role, "/health_generate"].status_code == 200
    assert eng[role, "/health"].content == real[role, "/health"].content == b""
    assert real[role, "/version"].status_code == real[role, "/loads"].status_code == 404
    assert eng[role, "/v1/models/nope"].json() == real[role, "/v1/models/nope"].json()
    rm, em = real[role, "/model_info"].json(), eng[role, "/model_info"].json()
    assert list(em) == [k for k in rm if k not in REAL_ONLY_MODEL_INFO]
    assert (em["served_model_name"], em["disaggregation_mode"]) == (rm["served_model_name"], role)
    assert shape(eng[role, "/v1/loads"].json()) == shape(real[role, "/v1/loads"].json())
    for path in ("/v1/models", f"/v1/models/{SERVED}"):
        r, e = real[role, path].json(), eng[role, path].json()
        assert shape(e) == shape(r), path
    card = eng[role, "/v1/models"].json()["data"][0]
    assert {k: card[k] for k in ("id", "object", "owned_by", "root", "parent")} == {
        k: real[role, "/v1/models"].json()["data"][0][k] for k in ("id", "object", "owned_by", "root", "parent")
    }


def test_chat_answers_and_finish_reasons(answers):
    for kind, a in answers.items():
        _pre, dec = (r.json() for r in a["length"])
        choice = dec["choices"][0]
        assert (choice["finish_reason"], choice["matched_stop"]) == ("length", None), kind
        assert dec["usage"]["completion_tokens"] == 6, kind
        assert dec["usage"]["total_tokens"] == dec["usage"]["prompt_tokens"] + 6, kind
        stopped = a["stop"][1].json()["choices"][0]
        greedy = a["greedy"][1].json()["choices"][0]["message"]["content"]
        assert (stopped["finish_reason"], stopped["matched_stop"]) == ("stop", a["stop_str"]), (kind, greedy)
        assert stopped["message"]["content"] == greedy[: greedy.find(a["stop_str"])], kind
    real, eng = answers["real"], answers["engine"]
    for name in ("length", "stop"):
        for leg in (0, 1):
            r, e = real[name][leg].json(), eng[name][leg].json()
            assert real[name][leg].status_code == eng[name][leg].status_code == 200
            assert list(e) == list(r) and list(e["usage"]) == list(r["usage"]), (name, leg)
            assert list(e["choices"][0]) == list(r["choices"][0]), (name, leg)
            assert list(e["choices"][0]["message"]) == list(r["choices"][0]["message"]), (name, leg)
            assert shape(e["metadata"]) == shape(r["metadata"]), (name, leg)
    # known difference (docs/engine.md): real SGLang's prefill answers the first token it sampled; the engine's none
    assert real["length"][0].json()["usage"]["completion_tokens"] == 1
    assert eng["length"][0].json()["usage"]["completion_tokens"] == 0


def test_default_temperature_samples_on_both(answers):
    """No temperature in the request: SGLang samples at 1.0, and so must the engine (it used to be greedy)."""
    for kind, a in answers.items():
        greedy = a["greedy"][1].json()["choices"][0]["message"]["content"]
        texts = [r.json()["choices"][0]["message"]["content"] for r in a["sampled"]]
        assert len(set(texts)) > 1 and set(texts) != {greedy}, (kind, greedy, texts)


def events(lines: list[str]) -> list[tuple]:
    """A chat stream's `data:` payloads as (kind, keys...): role, content, finish:<reason>, usage, [DONE]."""
    out = []
    for line in lines:
        if line == "[DONE]":
            out.append(("[DONE]",))
            continue
        c = json.loads(line)
        if not c["choices"]:
            out.append(("usage", tuple(c), tuple(c["usage"])))
            continue
        ch = c["choices"][0]
        kind = (
            "role" if "role" in ch["delta"] else f"finish:{ch['finish_reason']}" if ch["finish_reason"] else "content"
        )
        out.append((kind, tuple(c), tuple(ch), tuple(ch["delta"])))
    # runs of content chunks as one (a token's text is one chunk; the two tokenizers cut text differently)
    return [e for i, e in enumerate(out) if not (e[0] == "content" and i and out[i - 1][0] == "content")]


@pytest.mark.parametrize("name", ["stream_usage", "stream"])
def test_chat_stream_sequence(answers, name):
    real_pre, real = answers["real"][name]
    eng_pre, eng = answers["engine"][name]
    assert events(eng) == events(real), (real, eng)
    assert [e[0] for e in events(real)] == ["role", "content", "finish:length"] + (
        ["usage"] if name == "stream_usage" else []
    ) + ["[DONE]"]
    # the prefill's stream ends as the decode's does (what it holds differs: its first token, see above)
    assert real_pre.status_code == eng_pre.status_code == 200
    assert real_pre.text.rstrip().endswith("data: [DONE]") and eng_pre.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_requests(answers, bad):
    for leg in (0, 1):
        r, e = answers["real"]["bad"][bad][leg], answers["engine"]["bad"][bad][leg]
        assert (e.status_code, list(e.json())) == (r.status_code, list(r.json())), (bad, leg, r.text, e.text)
        if BAD[bad][0] == "/generate":
            assert list(e.json()["error"]) == list(r.json()["error"]) == ["message"]
        else:
            assert e.json()["code"] == r.json()["code"] == 400 and e.json()["param"] is r.json()["param"] is None
    if bad == "max_tokens -1":  # a value out of range: both say BadRequestError (a malformed body: see the doc)
        assert e.json()["type"] == r.json()["type"] == "BadRequestError"


def test_pair_canary_judged_the_same(answers):
    """pdctl's pair canary (/generate to both workers, one room) passes on both, reading the same fields."""
    for kind, a in answers.items():
        pre, dec = a["canary"]
        legs = [LegAnswer(status_code=r.status_code, body=r.json()) for r in (pre, dec)]
        verdict = judge_pair(0, 0, a["canary_room"], *legs)
        assert verdict.status == PASS, (kind, verdict.found)
        meta = dec.json()["meta_info"]
        assert meta["completion_tokens"] == 8 and meta["finish_reason"] == {"type": "length", "length": 8}, kind
        assert pre.json()["meta_info"]["finish_reason"] == {"type": "length", "length": 0}, kind


def test_chat_n2_real_pd_never_answers_the_engine_does(pairs):
    """Known difference (docs/engine.md): a chat `n` > 1 as sglang-router sends it (a room per choice) is never
    answered by real SGLang 0.5.23's PD decode; the engine answers it, each choice sampled. Runs last: the abandoned
    request is aborted on the real decode, which its abort counter shows."""
    body = chat(max_tokens=6, n=2)
    _pre, dec = pd_post(pairs["engine"], CHAT, body, n=2)
    texts = [c["message"]["content"] for c in dec.json()["choices"]]
    assert len(texts) == 2 and texts[0] != texts[1], texts
    real = pairs["real"]
    b = pd_body(real, body, 2)
    with cf.ThreadPoolExecutor(2) as ex:
        legs = [ex.submit(httpx.post, f"{url}{CHAT}", json=b, timeout=8) for url in (real.prefill, real.decode)]
        with pytest.raises(httpx.ReadTimeout):
            legs[1].result()  # the decode never answers (its prefill answered in one try, timed out in another)
        with contextlib.suppress(httpx.HTTPError):
            legs[0].result()
