"""The real SGLang (`python -m sglang.launch_server`). A failed KV transfer is an error answer (the router gets a
500 "KV transfer failed"), never a repeated token: a greedy tiny model may well repeat a word. The degraded
bootstrap is the seed's NIXL incident; with mooncake on 0.5.23 a decode restarted alone four times under a running
prefill kept passing the pair canary (shared/reference/real-sglang-cpu, 2026-12-03), so it is only possible there."""

from pdctl.engines import EngineKind, HazardKnowledge, register

_MOONCAKE = HazardKnowledge(
    False,
    "not reproduced with mooncake on SGLang 0.5.23 (pair canary passed after each of "
    "4 decode-only restarts); `pdctl verify pairs` decides",
)

KIND = register(
    EngineKind(
        name="sglang",
        module="sglang.launch_server",
        repeats_token_on_failed_transfer=False,
        decode_alone_hazard={
            "nixl": HazardKnowledge(True, "the seed's degraded bootstrap (NIXL keeps stale peers)"),
            "mooncake": _MOONCAKE,
            "mooncake_tcp": _MOONCAKE,
        },
    )
)
