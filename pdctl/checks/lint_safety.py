"""The safety nets launch recipes switch off: pure judges over what the host's parser made of a role's command line
(`parsed`: its values, defaults included) and the env the role runs with (declared, else the registry's default).

Each returns Findings of the rules in pdctl.checks.lint_rules; docs/lint.md explains every bound used here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pdctl.checks.lint import effective_env
from pdctl.checks.lint_rules import Finding
from pdctl.checks.pd_compat import compare

#: beyond this a disaggregation timeout is no safety net: a dead peer pins a room for half an hour or more
SANE_TIMEOUT_S = 1800
#: decode keeps a dead prefill's info this long at most (interval x max failures) before failing its rooms
SANE_HEARTBEAT_WINDOW_S = 300

WAITING = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
BOOTSTRAP = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"
HB_INTERVAL = "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL"
HB_MAX = "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE"
HEALTH_GEN = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
HEALTH_BYPASS = "SGLANG_DIAG_BYPASS_HEALTH_GENERATE"


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def judge_worker_safety(
    label: str, env: Mapping[str, str], parsed: Mapping[str, Any], registry: Mapping[str, Any] | None, version: str = ""
) -> list[Finding]:
    """A prefill or decode worker: its disaggregation timeouts, heartbeat, health generation and metrics."""
    out: list[Finding] = []
    for rule, name in (("waiting-timeout", WAITING), ("bootstrap-timeout", BOOTSTRAP)):
        v = _number(effective_env(name, env, registry))
        if v is not None and (v <= 0 or v > SANE_TIMEOUT_S):
            out.append(
                Finding(
                    rule,
                    label,
                    name,
                    f"{name}={v:g} s: " + ("disabled" if v <= 0 else f"beyond the sane bound of {SANE_TIMEOUT_S} s"),
                    fix=f"leave it unset (300 s) or at most {SANE_TIMEOUT_S}",
                    version=version,
                    data={"value": v, "bound": SANE_TIMEOUT_S},
                )
            )
    interval, misses = _number(effective_env(HB_INTERVAL, env, registry)), _number(effective_env(HB_MAX, env, registry))
    if interval is not None and misses is not None:
        window = interval * misses
        if interval <= 0 or misses <= 0 or window > SANE_HEARTBEAT_WINDOW_S:
            out.append(
                Finding(
                    "heartbeat-window",
                    label,
                    f"{HB_INTERVAL} x {HB_MAX}",
                    f"{interval:g} s x {misses:g} = {window:g} s before decode drops a dead prefill",
                    fix=f"at most {SANE_HEARTBEAT_WINDOW_S} s (the default is 5 s x 2)",
                    version=version,
                    data={"window": window, "bound": SANE_HEARTBEAT_WINDOW_S},
                )
            )
    if effective_env(HEALTH_GEN, env, registry) is False:
        out.append(
            Finding(
                "health-generation-off",
                label,
                HEALTH_GEN,
                f"{HEALTH_GEN}=0: /health does not generate",
                fix=f"remove {HEALTH_GEN}",
                version=version,
            )
        )
    if effective_env(HEALTH_BYPASS, env, registry) is True:
        out.append(
            Finding(
                "health-generation-off",
                label,
                HEALTH_BYPASS,
                f"{HEALTH_BYPASS}=1: health generation is bypassed",
                fix=f"remove {HEALTH_BYPASS}",
                version=version,
            )
        )
    if parsed and not parsed.get("enable_metrics", False):
        out.append(
            Finding(
                "metrics-off",
                label,
                "--enable-metrics",
                "the worker runs without --enable-metrics",
                fix="pdctl deploy (it always renders --enable-metrics; the inventory cannot turn it off)",
                version=version,
            )
        )
    tp = _number(parsed.get("tp_size")) if parsed else None
    if tp is not None and tp > 1 and not parsed.get("enable_metrics_for_all_schedulers", False):
        out.append(
            Finding(
                "tp-rank0-metrics",
                label,
                "--tp-size",
                f"tp {tp:g}: only rank 0's scheduler metrics are exported",
                fix="add --enable-metrics-for-all-schedulers to see every rank",
                version=version,
            )
        )
    return out


def judge_pair(workers: Sequence[tuple[str, str, Mapping[str, Any], str]]) -> list[Finding]:
    """Prefill against decode: (label, role, parsed, version) of every worker the parser answered for. One finding
    per setting a pair disagrees on (pdctl.checks.pd_compat's field table), then a version mismatch."""
    out: list[Finding] = []
    prefill = [w for w in workers if w[1] == "prefill"]
    decode = [w for w in workers if w[1] == "decode"]
    for p_label, _r, p_parsed, p_version in prefill:
        for d_label, _r2, d_parsed, d_version in decode:
            pair = f"{p_label} / {d_label}"
            p_short, d_short = p_label.split("@")[0], d_label.split("@")[0]  # prefill[0]@host:port -> prefill[0]
            diffs, _compared = compare(p_parsed, d_parsed)
            out += [
                Finding(
                    x.field.rule,
                    pair,
                    x.field.flag,
                    x.message(p_short, d_short),
                    fix=x.fix,
                    data={"key": x.field.key, "prefill": x.prefill.value, "decode": x.decode.value},
                )
                for x in diffs
            ]
            if p_version and d_version and p_version != d_version:
                out.append(
                    Finding(
                        "version-mismatch",
                        pair,
                        "version",
                        f"prefill runs {p_version}, decode runs {d_version}",
                        fix="install the same version on both hosts",
                    )
                )
    return out


def judge_router(
    label: str,
    parsed: Mapping[str, Any],
    probe_timeout: float,
    worker_timeouts: Sequence[tuple[str, str, float]],
    version: str = "",
    restart_window: float | None = None,
) -> list[Finding]:
    """The router: how long it keeps routing to a dead worker against the declared probe window, how long a
    restarted worker takes to come back against the restart window (the router's ready_timeout, which restart and
    deploy wait), and the order of its timeouts against the engine's (`worker_timeouts`: (worker label, env name,
    seconds) of the prefill's bootstrap and the decode's waiting timeouts, the ones that bound a room)."""
    out: list[Finding] = []
    if not parsed:
        return out
    interval, threshold = (
        _number(parsed.get("health_check_interval_secs")),
        _number(parsed.get("health_failure_threshold")),
    )
    back = _number(parsed.get("health_success_threshold"))
    if interval is not None and back is not None and restart_window is not None and interval * back > restart_window:
        out.append(
            Finding(
                "router-health-window",
                label,
                "--health-success-threshold",
                f"{interval:g} s x {back:g} successes = {interval * back:g} s before a restarted worker is "
                f"back in rotation, longer than the restart window of {restart_window:g} s "
                "(the router's ready_timeout)",
                fix="a shorter --health-check-interval-secs",
                version=version,
                data={"window": interval * back, "restart_window": restart_window},
            )
        )
    if parsed.get("disable_health_check"):
        out.append(
            Finding(
                "router-health-window",
                label,
                "--disable-health-check",
                "the router never checks its workers: a dead one keeps receiving requests",
                fix="remove --disable-health-check",
                version=version,
            )
        )
    elif interval is not None and threshold is not None and interval * threshold > probe_timeout:
        out.append(
            Finding(
                "router-health-window",
                label,
                "--health-check-interval-secs",
                f"{interval:g} s x {threshold:g} failures = {interval * threshold:g} s before a dead worker "
                f"leaves rotation, longer than the probe window of {probe_timeout:g} s "
                "(final_health.probe.timeout)",
                fix="e.g. --health-check-interval-secs 2 (pdctl's default)",
                version=version,
                data={"window": interval * threshold, "probe_timeout": probe_timeout},
            )
        )
    return out + _timeout_order(label, parsed, probe_timeout, worker_timeouts, version, restart_window)


def _longest(worker_timeouts: Sequence[tuple[str, str, float]], name: str) -> tuple[str, float] | None:
    armed = [(w, s) for w, n, s in worker_timeouts if n == name and s > 0]  # <= 0: waiting-timeout's finding
    return max(armed, key=lambda ws: ws[1]) if armed else None


def _timeout_order(
    label: str,
    parsed: Mapping[str, Any],
    probe_timeout: float,
    worker_timeouts: Sequence[tuple[str, str, float]],
    version: str,
    restart_window: float | None,
) -> list[Finding]:
    """Rule timeout-order. A stuck room is failed by the engine after the prefill's bootstrap timeout (the
    sender in Bootstrapping) and then the decode's waiting timeout (WaitingForInput, timed from the decode's
    metadata): successive phases, so they add up, as SGLang's own deferred bootstrap budgets waiting + bootstrap.
    The router's request timeout must outlast that sum and the probe; the breaker must close within the restart
    window; with the breaker off nothing sheds a worker whose /health passes while its requests fail."""
    out: list[Finding] = []
    request = _number(parsed.get("request_timeout_secs"))
    phases = []  # in the order a room meets them: Bootstrapping, then WaitingForInput
    for name in (BOOTSTRAP, WAITING):
        found = _longest(worker_timeouts, name)
        if found is not None:
            phases.append((found[0], name, found[1]))
    if request is not None and phases and sum(s for _w, _n, s in phases) >= request:
        total = sum(s for _w, _n, s in phases)
        chain = " then ".join(f"{w}'s {n} ({s:g} s)" for w, n, s in phases)
        out.append(
            Finding(
                "timeout-order",
                label,
                "--request-timeout-secs",
                f"the router gives up after {request:g} s, before the engine fails a stuck room: {chain} = {total:g} s",
                fix=f"--request-timeout-secs above {total:g}, or lower those timeouts",
                version=version,
                data={
                    "request_timeout": request,
                    "engine_deadline": total,
                    "phases": [{"worker": w, "env": n, "seconds": s} for w, n, s in phases],
                },
            )
        )
    if request is not None and probe_timeout >= request:
        out.append(
            Finding(
                "timeout-order",
                label,
                "final_health.probe.timeout",
                f"the probe waits {probe_timeout:g} s, the router only {request:g} s",
                fix="keep final_health.probe.timeout below --request-timeout-secs",
                version=version,
            )
        )
    if parsed.get("disable_circuit_breaker"):
        out.append(
            Finding(
                "timeout-order",
                label,
                "--disable-circuit-breaker",
                "no circuit breaker: a worker whose /health passes while its requests fail keeps receiving them",
                fix="remove --disable-circuit-breaker",
                version=version,
            )
        )
        return out
    open_s = _number(parsed.get("cb_timeout_duration_secs"))
    if open_s is not None and restart_window is not None and open_s > restart_window:
        out.append(
            Finding(
                "timeout-order",
                label,
                "--cb-timeout-duration-secs",
                f"an open circuit stays open {open_s:g} s, longer than the restart window of "
                f"{restart_window:g} s (the router's ready_timeout): a worker restarted after its "
                "circuit opened is still refused when restart ends",
                fix=f"--cb-timeout-duration-secs at most {restart_window:g}",
                version=version,
                data={"open_s": open_s, "restart_window": restart_window},
            )
        )
    return out
