"""The SGLang environment variables the bundled engine knows, for `pdctl lint` on the embedded default.

"honoured": the engine reads it and acts on it, with SGLang's meaning and default. "accepted": a real SGLang name
the engine takes without effect on a CPU (a GPU kernel switch, say), so an inventory written for production lints
clean here too. Types are those of SGLang 0.5.23's `Envs` registry (EnvBool, EnvInt, EnvFloat, EnvStr); a name
only this engine reads is marked "engine-only". Anything else under SGLANG_ is unknown to the engine.
"""

from __future__ import annotations


def _env(type_: str, default, use: str, note: str = "") -> dict:
    return {"type": type_, "default": default, "alias": None, "use": use, "note": note}


ENV_NAMES: dict[str, dict] = {
    # honoured: the KV transfer's safety nets and the advertised address, as SGLang reads them
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": _env("EnvInt", 300, "honoured"),
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": _env("EnvInt", 300, "honoured"),
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": _env("EnvFloat", 5.0, "honoured"),
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": _env("EnvInt", 2, "honoured"),
    "SGLANG_DISAGGREGATION_INFLIGHT_TIMEOUT": _env(
        "EnvFloat", 300, "honoured", "engine-only: upstream has no prefill inflight timeout"
    ),
    "SGLANG_HOST_IP": _env("EnvStr", None, "honoured", "read directly by SGLang, outside its registry"),
    # honoured: how often a non-streaming request's tokens reach the tokenizer side (and its metrics)
    "SGLANG_FORCE_STREAM_INTERVAL": _env("EnvInt", 50, "honoured"),
    # honoured: sglang:forward_execution_seconds_total is fed only with it on, as SGLang's device timer
    "SGLANG_ENABLE_METRICS_DEVICE_TIMER": _env("EnvBool", False, "honoured"),
    # honoured by the mooncake backend's failed-session probe (prefill)
    "SGLANG_ENABLE_FAILED_SESSION_PROBE": _env("EnvBool", True, "honoured"),
    "SGLANG_FAILED_SESSION_PROBE_INTERVAL_S": _env("EnvFloat", 30.0, "honoured"),
    "SGLANG_FAILED_SESSION_PROBE_MAX_INTERVAL_S": _env("EnvFloat", 300.0, "honoured"),
    "SGLANG_FAILED_SESSION_IDLE_TIMEOUT_S": _env("EnvFloat", 600.0, "honoured"),
    # honoured by the overlap-corruption drill only: the switch of the seed's corruption (pdctl verify outputs)
    "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": _env("EnvBool", True, "honoured", "the overlap-corruption drill's switch"),
    # accepted: production switches with no effect on the CPU engine
    "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": _env("EnvBool", True, "accepted"),
    "SGLANG_DIAG_BYPASS_HEALTH_GENERATE": _env("EnvBool", False, "accepted"),
    "SGLANG_HEALTH_CHECK_TIMEOUT": _env("EnvInt", 20, "accepted", "read directly by SGLang, outside its registry"),
    "SGLANG_DISAGGREGATION_NIXL_BACKEND": _env("EnvStr", "UCX", "accepted"),
    "SGLANG_DISAGGREGATION_THREAD_POOL_SIZE": _env("EnvInt", None, "accepted"),
    "SGLANG_DISAGGREGATION_QUEUE_SIZE": _env("EnvInt", 4, "accepted"),
    "SGLANG_LOGGING_CONFIG_PATH": _env("EnvStr", None, "accepted"),
}
