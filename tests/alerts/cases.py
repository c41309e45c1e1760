"""promtool unit-test cases for pdctl/alerts/pdctl.rules.yml: each alert's condition and its non-firing twin.

A case is (name, alert, input series {series: values}, eval time, expected alerts); an expected alert is its labels
(alertname and severity added from the rule) plus `value` when an annotation prints $value. The test turns these into
a promtool test file; the annotations each alert must carry are rendered from the rule's own templates."""

from __future__ import annotations

D = 'deployment="d"'
KV_P0 = f'pdctl_kv_failures_unexplained_since_start{{{D},target="prefill[0]@ha:30000",kind="transfer"}}'
P = 'prefill="prefill[0]@ha:30000",decode="decode[0]@hb:30002"'
PAIR = {"deployment": "d", "prefill": "prefill[0]@ha:30000", "decode": "decode[0]@hb:30002"}
SCHED = 'tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def pf(metric: str, inst: str, model: str = "tiny", et: str = "prefill") -> str:
    """An SGLang scheduler series as Prometheus stores it after scraping job "sglang"."""
    return f'{metric}{{job="sglang",instance="{inst}",engine_type="{et}",model_name="{model}",{SCHED}}}'


def tok(metric: str, inst: str, model: str = "tiny", et: str = "decode") -> str:
    return f'{metric}{{job="sglang",instance="{inst}",engine_type="{et}",model_name="{model}"}}'


INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"
GEN = "sglang:generation_tokens_total"
XFER = "sglang:num_transfer_failed_reqs_total"
BOOT = "sglang:num_bootstrap_failed_reqs_total"

# (name, alertname, {series: values}, eval_time, [expected alert labels])   input interval: 5 s
CASES = [
    # the pin: the watch's verdict turns pinned at 25 s; firing by 40 s (for 10 s on a 5 s group interval)
    ("pin fires", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x30"}, "40s", [{"deployment": "d"}]),
    ("pin still pending before for:", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1x30"}, "30s", []),
    ("one pinned sample is a flap", "PdctlInflightPinned", {f"pdctl_inflight_pinned{{{D}}}": "0x4 1 0x30"}, "60s", []),
    (
        "busy is not pinned",
        "PdctlInflightPinned",
        {f"pdctl_inflight_busy{{{D}}}": "1x30", f"pdctl_inflight_pinned{{{D}}}": "0x30"},
        "120s",
        [],
    ),
    (
        "watch-counted transfer failures",
        "PdctlKvFailuresRising",
        {KV_P0: "0x80 2x40"},
        "450s",
        [{"deployment": "d", "target": "prefill[0]@ha:30000", "kind": "transfer"}],
    ),
    (
        "a series born non-zero (first failure) fires too",
        "PdctlKvFailuresRising",
        {f'pdctl_kv_failures_unexplained_since_start{{{D},target="decode[0]@hb:30002",kind="bootstrap"}}': "_x10 1x20"},
        "120s",
        [{"deployment": "d", "target": "decode[0]@hb:30002", "kind": "bootstrap"}],
    ),
    (
        "old failures, none new",
        "PdctlKvFailuresRising",
        {KV_P0: "0x10 2x200"},
        "900s",
        [],
    ),
    (
        "failures every abort explains (a storm): the raw count rises, the unexplained stays 0",
        "PdctlKvFailuresRising",
        {
            f'pdctl_kv_failures_since_start{{{D},target="prefill[0]@ha:30000",kind="transfer"}}': "0x80 3x40",
            KV_P0: "0x120",
        },
        "450s",
        [],
    ),
    (
        "the watch restarted (its count back to 0)",
        "PdctlKvFailuresRising",
        {KV_P0: "3x80 0x40"},
        "450s",
        [],
    ),
    (
        "old failures, the watch not scraped for 6 minutes",
        "PdctlKvFailuresRising",
        {KV_P0: "2x100 stale _x72 2x40"},
        "920s",
        [],
    ),
    (
        "a new failure after the watch restarted",
        "PdctlKvFailuresRising",
        {KV_P0: "3x80 0x4 1x40"},
        "480s",
        [{"deployment": "d", "target": "prefill[0]@ha:30000", "kind": "transfer"}],
    ),
    (
        "a restarted watch whose first scrape counts fewer failures than the old one did",
        "PdctlKvFailuresRising",
        {KV_P0: "3x80 _x12 1x60"},
        "540s",
        [{"deployment": "d", "target": "prefill[0]@ha:30000", "kind": "transfer"}],
    ),
    (
        "SGLang transfer failures on one prefill",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "0x80 2x40", pf(XFER, "hc:30000"): "0x120"},
        "450s",
        [{"job": "sglang", "instance": "ha:30000", "engine_type": "prefill", "model_name": "tiny", "value": 2}],
    ),
    (
        "failures no more than the aborts there (an abort storm): no alert",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "0x80 3x40",
            tok("sglang:num_aborted_requests_total", "ha:30000", et="prefill"): "0x80 5x40",
        },
        "450s",
        [],
    ),
    (
        "failures beyond the aborts there fire",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "0x80 4x40",
            tok("sglang:num_aborted_requests_total", "ha:30000", et="prefill"): "0x80 1x40",
        },
        "450s",
        [{"job": "sglang", "instance": "ha:30000", "engine_type": "prefill", "model_name": "tiny", "value": 4}],
    ),
    (
        "a failure counter born at its first failure, as SGLang's (no series before it), fires",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "_x80 1x40"},
        "450s",
        [{"job": "sglang", "instance": "ha:30000", "engine_type": "prefill", "model_name": "tiny", "value": 1}],
    ),
    (
        "a failure counter born with as many aborts born beside it: no alert",
        "SGLangTransferFailuresRising",
        {
            pf(XFER, "ha:30000"): "_x80 1x40",
            tok("sglang:num_aborted_requests_total", "ha:30000", et="prefill"): "_x80 1x40",
        },
        "450s",
        [],
    ),
    (
        "a prefill restart resets the counter: no failure",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "5x80 0x40"},
        "450s",
        [],
    ),
    (
        "a restart with a scrape gap: no failure",
        "SGLangTransferFailuresRising",
        {pf(XFER, "ha:30000"): "5x80 _x3 0x40"},
        "450s",
        [],
    ),
    (
        "SGLang bootstrap failures on a decode",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "0x80 1x40"},
        "450s",
        [{"job": "sglang", "instance": "hb:30002", "engine_type": "decode", "model_name": "tiny", "value": 1}],
    ),
    (
        "a bootstrap failure counter born at its first failure fires",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "_x80 2x40"},
        "450s",
        [{"job": "sglang", "instance": "hb:30002", "engine_type": "decode", "model_name": "tiny", "value": 2}],
    ),
    (
        "a decode restart resets the counter: no failure",
        "SGLangBootstrapFailuresRising",
        {pf(BOOT, "hb:30002", et="decode"): "4x80 0x40"},
        "450s",
        [],
    ),
    (
        "a pair fails two canaries and more",
        "PdctlPairCanaryFailing",
        {f"pdctl_pair_ok{{{D},{P}}}": "1x5 0x20"},
        "90s",
        [PAIR],
    ),
    (
        "a pair fails one canary then recovers",
        "PdctlPairCanaryFailing",
        {f"pdctl_pair_ok{{{D},{P}}}": "1x5 0x5 1x20"},
        "90s",
        [],
    ),
    (
        "three consecutive failed canaries",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 3x5"},
        "90s",
        [{**PAIR, "value": 3}],
    ),
    (
        "two failures then a pass",
        "PdctlPairBroken",
        {f"pdctl_pair_failures_consecutive{{{D},{P}}}": "0x5 1x5 2x5 0x5"},
        "90s",
        [],
    ),
    (
        "a decode restarted under a long-running prefill",
        "PdctlLineageHazard",
        {f'pdctl_lineage_hazard{{{D},{P},hazard="degraded-bootstrap"}}': "1x40"},
        "150s",
        [{**PAIR, "hazard": "degraded-bootstrap"}],
    ),
    (
        "a co-restart passing through prefill-restarted-alone",
        "PdctlLineageHazard",
        {f'pdctl_lineage_hazard{{{D},{P},hazard="prefill-restarted-alone"}}': "1x12 0x30"},
        "150s",
        [],
    ),
    (
        "router not ready",
        "PdctlRouterNotReady",
        {f'pdctl_router_ready{{{D},target="router[0]@hc:30001"}}': "0x20"},
        "60s",
        [{"deployment": "d", "target": "router[0]@hc:30001"}],
    ),
    (
        "router not ready for 20 s (a worker restarting)",
        "PdctlRouterNotReady",
        {f'pdctl_router_ready{{{D},target="router[0]@hc:30001"}}': "0x4 1x20"},
        "60s",
        [],
    ),
    (
        "a target unreachable for 3 minutes",
        "PdctlTargetUnknown",
        {f'pdctl_target_up{{{D},target="decode[0]@hb:30002"}}': "0x40"},
        "180s",
        [{"deployment": "d", "target": "decode[0]@hb:30002"}],
    ),
    (
        "a target back within a minute",
        "PdctlTargetUnknown",
        {f'pdctl_target_up{{{D},target="decode[0]@hb:30002"}}': "0x12 1x30"},
        "180s",
        [],
    ),
    (
        "a check failing",
        "PdctlCheckFailing",
        {f'pdctl_check_ok{{{D},layer="health",target="decode[0]@hb:30002",check="health"}}': "0x40"},
        "180s",
        [{"deployment": "d", "layer": "health", "target": "decode[0]@hb:30002", "check": "health"}],
    ),
    (
        "a check of an unknown target (its series removed)",
        "PdctlCheckFailing",
        {f'pdctl_check_ok{{{D},layer="health",target="decode[0]@hb:30002",check="health"}}': "1x4 _x40"},
        "180s",
        [],
    ),
    (
        "heal budget spent",
        "PdctlHealBudgetExhausted",
        {f"pdctl_heal_budget_exhausted{{{D}}}": "0x4 1x10"},
        "60s",
        [{"deployment": "d"}],
    ),
    ("heal budget not spent", "PdctlHealBudgetExhausted", {f"pdctl_heal_budget_exhausted{{{D}}}": "0x20"}, "60s", []),
    (
        "a heal failed",
        "PdctlHealFailed",
        {f'pdctl_heals_total{{{D},outcome="failed"}}': "0x10 1x10", f'pdctl_heals_total{{{D},outcome="done"}}': "0x20"},
        "90s",
        [{"deployment": "d", "outcome": "failed"}],
    ),
    (
        "heals that worked",
        "PdctlHealFailed",
        {f'pdctl_heals_total{{{D},outcome="failed"}}': "0x20", f'pdctl_heals_total{{{D},outcome="done"}}': "0x10 1x10"},
        "90s",
        [],
    ),
    (
        "the watch's scrape fails",
        "PdctlWatchDown",
        {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "0x30"},
        "120s",
        [{"job": "pdctl-watch", "instance": "127.0.0.1:9464"}],
    ),
    (
        "the watch restarted (one failed scrape)",
        "PdctlWatchDown",
        {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "1x4 0x4 1x30", 'up{job="other",instance="x:1"}': "0x30"},
        "120s",
        [],
    ),
    (
        "no watch scraped at all",
        "PdctlWatchAbsent",
        {'up{job="sglang",instance="ha:30000"}': "1x80"},
        "360s",
        [{"job": "pdctl-watch"}],
    ),
    ("a watch scraped", "PdctlWatchAbsent", {'up{job="pdctl-watch",instance="127.0.0.1:9464"}': "1x80"}, "360s", []),
    (
        "health rounds stopped at 60 s",
        "PdctlWatchRoundsStale",
        {f'pdctl_round_last_timestamp_seconds{{{D},cadence="health"}}': "0+5x12 60x30"},
        "190s",
        [{"deployment": "d", "cadence": "health", "value": 130}],
    ),
    (
        "rounds on time (pairs every 30 s)",
        "PdctlWatchRoundsStale",
        {
            f'pdctl_round_last_timestamp_seconds{{{D},cadence="health"}}': "0+5x40",
            f'pdctl_round_last_timestamp_seconds{{{D},cadence="pairs"}}': "0x6 30x6 60x6 90x6 120x6 150x6 180x6",
        },
        "200s",
        [],
    ),
    (
        "inflight held, decode flat: the seed's wedge",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "100x40"},
        "180s",
        [{"job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "inflight held, decode never generated (no series)",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "2x40"},
        "180s",
        [{"job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 2}],
    ),
    (
        "another model's decode progress does not hide it",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hx:30002", model="other"): "0+10x40"},
        "180s",
        [{"job": "sglang", "instance": "ha:30000", "model_name": "tiny", "value": 1}],
    ),
    (
        "inflight > 0 under load with decode progress",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "1x40", tok(GEN, "hb:30002"): "0+10x40"},
        "180s",
        [],
    ),
    (
        "idle: inflight 0, decode flat",
        "SGLangPrefillInflightStalled",
        {pf(INFLIGHT, "ha:30000"): "0x40", tok(GEN, "hb:30002"): "100x40"},
        "180s",
        [],
    ),
]
