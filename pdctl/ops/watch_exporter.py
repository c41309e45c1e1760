"""`pdctl watch`'s Prometheus exporter: the watch's state as the metrics of the exporter contract (docs/watch.md),
built at each scrape from the state (so a target that turned unknown has its check series gone, never 0), in its
own CollectorRegistry (no process/platform collectors), served by prometheus_client's HTTP server on a daemon
thread.

Where it listens is checked on what the name resolves to, not on how it is spelled: every address `--listen` (or
`watch.listen`) resolves to must be loopback unless --listen-any (`127.evil.example` may resolve to 0.0.0.0), and
the exporter binds the address that was checked, so no second lookup can answer otherwise."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pdctl.checks.result import Status

if TYPE_CHECKING:
    from http.server import HTTPServer
    from threading import RLock, Thread

    from pdctl.checks.watch_state import WatchState
    from pdctl.ops.context import Deployment
    from pdctl.ops.watch_outputs import Outputs


class Watch(Protocol):
    """What the exporter reads of pdctl.ops.watch.Watch (not imported: it imports this module)."""

    dep: Deployment
    state: WatchState
    lock: RLock
    outputs: Outputs

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

            out_ok = gauge(
                "pdctl_output_ok",
                "1 the watch's output (its --timeline, its change lines) took its last batch, 0 it fails (full disk, "
                "a FIFO nobody reads); the watch goes on meanwhile",
                ("output",),
            )
            dropped = CounterMetricFamily(
                "pdctl_output_dropped_lines",
                "timeline lines the output lost: not written and no room left to keep them for later",
                labels=("deployment", "output"),
            )
            for name, h in sorted(w.outputs.ledger.outputs.items()):
                out_ok.add_metric([dep, name], 1 if h.ok else 0)
                dropped.add_metric([dep, name], h.dropped_lines)
            yield from (out_ok, dropped)


def _instance_labels(w: Watch) -> list[str]:
    return [w.dep.inv.label(role, i) for role, i, _ in w.dep.inv.instances()]


class Exporter:
    def __init__(self, server: HTTPServer, thread: Thread):
        self._server, self._thread = server, thread
        self.port = server.server_port
        host = str(server.server_address[0])
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"  # where it listens

    def close(self) -> None:
        """Stop serving and free the port (bounded: the server thread polls every 0.5 s)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)


#: host, port -> every address the exporter could bind for them, in getaddrinfo's order
Resolver = Callable[[str, int], list[str]]


def bind_addresses(host: str, port: int) -> list[str]:
    """What prometheus_client's server would bind for `host` (getaddrinfo, passive, stream), every answer in order.
    Raises OSError (socket.gaierror) when the name does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in infos))


def exporter_bind(host: str, port: int, *, listen_any: bool, said: str, resolve: Resolver = bind_addresses) -> str:
    """The address to serve the exporter on for `host`: the first it resolves to (as prometheus_client would
    choose), after every one was found loopback, unless `listen_any`. `said` names where the address came from
    and how it was written ("--listen NAME:PORT", "watch.listen NAME:PORT in FILE"). Raises UsageError naming it
    when the name does not resolve, or resolves to an address other than loopback (0.0.0.0 included) without
    --listen-any: the exporter tells anyone who asks the deployment's state, unauthenticated."""
    from pdctl.errors import UsageError
    from pdctl.host_address import not_loopback

    try:
        addresses = resolve(host, port)
    except OSError as e:
        raise UsageError(
            f"{said}: {host!r} does not resolve ({e.strerror or e})", hint="give an IP address, e.g. 127.0.0.1:9464"
        ) from None
    if not addresses:
        raise UsageError(f"{said}: {host!r} resolves to no address", hint="give an IP address, e.g. 127.0.0.1:9464")
    others = not_loopback(addresses)
    if others and not listen_any:
        resolved = "" if others == [host] else f"{host} resolves to {', '.join(others)}, "
        raise UsageError(
            f"{said}: {resolved}not a loopback address; the exporter has no authentication",
            hint="pass --listen-any to serve it there anyway (behind a firewall), or listen on "
            "127.0.0.1 and let a local Prometheus scrape it",
        )
    return addresses[0]


def serve_exporter(watch: Watch, host: str, port: int) -> Exporter:
    """Serve /metrics for `watch` on host:port (port 0: any free one, see Exporter.port); `host` as exporter_bind
    gave it (an address, so no second lookup decides where it listens). Raises UsageError naming the address when
    it cannot be bound."""
    from prometheus_client import CollectorRegistry, start_http_server

    from pdctl.errors import UsageError

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchCollector(watch))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise UsageError(
            f"--listen {where}: cannot serve the exporter there: {e.strerror or e}",
            hint="choose a free port on an address of this machine",
        ) from None
    return Exporter(server, thread)
