"""`pdctl watch`'s Prometheus exporter: the watch's state as the metrics of the exporter contract (docs/watch.md),
built at each scrape from the state (so a target that turned unknown has its check series gone, never 0), in its
own CollectorRegistry (no process/platform collectors), served by prometheus_client's HTTP server on a daemon
thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pdctl.checks.result import Status

if TYPE_CHECKING:
    from http.server import HTTPServer
    from threading import RLock, Thread

    from pdctl.checks.watch_state import WatchState
    from pdctl.ops.context import Deployment


class Watch(Protocol):
    """What the exporter reads of pdctl.ops.watch.Watch (not imported: it imports this module)."""

    dep: Deployment
    state: WatchState
    lock: RLock

    def wall(self) -> float: ...


HEAL_OUTCOMES = ("done", "failed", "refused", "dry")


class WatchCollector(Collector):
    """A prometheus_client collector reading a Watch's state under its lock."""

    def __init__(self, watch: Watch):
        self.watch = watch

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        from pdctl import __version__

        w = self.watch
        with w.lock:
            st = w.state
            now = w.wall()
            dep = st.deployment

            def gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
                return GaugeMetricFamily(name, doc, labels=("deployment", *labels))

            info = gauge("pdctl_watch_info", "pdctl watch is running; its version", ("version",))
            info.add_metric([dep, __version__], 1)
            ok = gauge(
                "pdctl_check_ok",
                "1 the check passes (or warns), 0 it fails; absent while unknown",
                ("layer", "target", "check"),
            )
            warn = gauge("pdctl_check_warn", "1 the check is a warning, else 0", ("layer", "target", "check"))
            ready = gauge(
                "pdctl_router_ready", "1 the router's /readiness is 200 with every declared worker healthy", ("target",)
            )
            for c in sorted(st.checks.values(), key=lambda c: (c.layer, c.target, c.check)):
                if c.status is Status.UNKNOWN:
                    continue
                labels = [dep, c.layer, c.target, c.check]
                ok.add_metric(labels, 0 if c.status is Status.FAIL else 1)
                warn.add_metric(labels, 1 if c.status is Status.WARN else 0)
                if c.layer == "health" and c.check == "/readiness":
                    ready.add_metric([dep, c.target], 1 if c.status is Status.PASS else 0)
            yield from (info, ok, warn, ready)

            instances = {dep_label for dep_label in _instance_labels(w)}
            up = gauge("pdctl_target_up", "1 the target's host answered in its last round, 0 unknown", ("target",))
            serving = gauge(
                "pdctl_target_serving",
                "1 the target answers GET /health with 200, 0 it does not (refused, timed out, an error status); "
                "0 too while its host does not answer",
                ("target",),
            )
            for target, is_up in sorted(st.target_up.items()):
                if target in instances:
                    up.add_metric([dep, target], 1 if is_up else 0)
                    if not is_up or ("health", target, "/health") in st.checks:
                        serving.add_metric([dep, target], 1 if st.serving(target) else 0)
            yield from (up, serving)

            pinned = gauge("pdctl_inflight_pinned", "1 while the inflight verdict is pinned", ())
            pinned.add_metric([dep], 1 if st.pinned else 0)
            pinned_s = gauge("pdctl_inflight_pinned_seconds", "seconds since the current pin began (0: no pin)", ())
            pinned_s.add_metric([dep], st.pinned_seconds(now))
            busy = gauge("pdctl_inflight_busy", "1 while the inflight verdict is busy", ())
            busy.add_metric([dep], 1 if st.busy else 0)
            yield from (pinned, pinned_s, busy)

            pair_ok = gauge(
                "pdctl_pair_ok", "the pair's last canary: 1 pass, 0 fail; absent while unknown", ("prefill", "decode")
            )
            latency = gauge(
                "pdctl_pair_latency_seconds",
                "the last canary's KV transfer time (else its decode answer time)",
                ("prefill", "decode"),
            )
            consecutive = gauge(
                "pdctl_pair_failures_consecutive", "consecutive failed canaries of the pair", ("prefill", "decode")
            )
            for (p, d), ps in sorted(st.pairs.items()):
                consecutive.add_metric([dep, p, d], ps.consecutive_failures)
                if ps.status is Status.UNKNOWN:
                    continue
                pair_ok.add_metric([dep, p, d], 1 if ps.status is Status.PASS else 0)
                if ps.latency_s is not None:
                    latency.add_metric([dep, p, d], ps.latency_s)
            yield from (pair_ok, latency, consecutive)

            kv = gauge(
                "pdctl_kv_failures_since_start",
                "transfer/bootstrap failures counted since the watch started, across counter resets",
                ("target", "kind"),
            )
            for (target, kind), total in sorted(st.failures_since_start().items()):
                kv.add_metric([dep, target, kind], total)
            real = gauge(
                "pdctl_kv_failures_unexplained",
                "the worker's failures that stand: a canary through its pairs failed after them (or none decided); "
                f"its current process's only, for {st.failures.window_s:g} s at most, 0 again after a heal",
                ("target", "kind"),
            )
            awaiting = gauge(
                "pdctl_kv_failures_awaiting_canary",
                "the worker's failures counted but not yet decided by a canary through its pairs",
                ("target", "kind"),
            )
            for (target, kind), left in sorted(st.unexplained_failures().items()):
                real.add_metric([dep, target, kind], left)
                awaiting.add_metric([dep, target, kind], st.failures.pending_count((target, kind)))
            hazard = gauge(
                "pdctl_lineage_hazard",
                "1 for each pair the lineage judge calls hazardous",
                ("prefill", "decode", "hazard"),
            )
            for (p, d), kind in sorted(st.hazards.items()):
                hazard.add_metric([dep, p, d, kind], 1)
            yield from (kv, real, awaiting, hazard)

            last = gauge(
                "pdctl_round_last_timestamp_seconds",
                "unix time of the last complete round of the cadence",
                ("cadence",),
            )
            for cadence, info_ in sorted(st.rounds.items()):
                if info_.last_complete is not None:
                    last.add_metric([dep, cadence], info_.last_complete)
            heals = CounterMetricFamily("pdctl_heals", "heals by outcome", labels=("deployment", "outcome"))
            for outcome in sorted(set(HEAL_OUTCOMES) | set(st.heals)):
                heals.add_metric([dep, outcome], st.heals.get(outcome, 0))
            exhausted = gauge("pdctl_heal_budget_exhausted", "1 once the heal budget per hour is spent", ())
            exhausted.add_metric([dep], 1 if st.heal_budget_exhausted else 0)
            tokens = CounterMetricFamily(
                "pdctl_canary_generated_tokens",
                "tokens the decodes generated for the watch's own canaries (pair and router canaries): what a rule "
                "on sglang:generation_tokens_total takes off to see the traffic's own progress",
                labels=("deployment",),
            )
            tokens.add_metric([dep], st.canary_tokens)
            change = gauge(
                "pdctl_change_in_progress",
                "1 while a pdctl deploy, restart or heal holds the deployment lock: its restarts are planned",
                (),
            )
            change.add_metric([dep], 1 if st.change else 0)
            yield from (last, heals, exhausted, tokens, change)


def _instance_labels(w: Watch) -> list[str]:
    return [w.dep.inv.label(role, i) for role, i, _ in w.dep.inv.instances()]


class Exporter:
    def __init__(self, server: HTTPServer, thread: Thread):
        self._server, self._thread = server, thread
        self.port = server.server_port

    def close(self) -> None:
        """Stop serving and free the port (bounded: the server thread polls every 0.5 s)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)


def serve_exporter(watch: Watch, host: str, port: int) -> Exporter:
    """Serve /metrics for `watch` on host:port (port 0: any free one, see Exporter.port). Raises UsageError
    naming the address when it cannot be bound."""
    from prometheus_client import CollectorRegistry, start_http_server

    from pdctl.errors import UsageError

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchCollector(watch))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise UsageError(
            f"--listen {host}:{port}: cannot serve the exporter there: {e.strerror or e}",
            hint="choose a free port on an address of this machine",
        ) from None
    return Exporter(server, thread)
