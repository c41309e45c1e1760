"""`pdctl watch`: final-health's layers run all the time, each on its own cadence, over ONE Deployment (its
connections stay open for the whole run), their results kept in a checks.watch_state.WatchState.

Cadences (inventory `watch:`, docs/watch.md): health (/health, router /readiness) every health_every s; inflight
(one read of every worker's /metrics: the PD gauges of the sliding window, and the failure counters) every
inflight_interval s; e2e and pairs every e2e_every / pairs_every s; flags and lineage every flags_every s. Each
cadence runs in its own thread, so a slow round of one (a hung canary) never delays another; a tick that comes
while the same cadence's previous round still runs is skipped and said in the timeline ({"event": "skip"}).

Counters raise suspicion, a canary decides: a worker's KV failure counter that rises, a router breaker that opens,
or a failed router canary makes the pairs round run at once ({"event": "canary"}); a pair whose canary failed is
canaried again CONFIRM_S later until it passes or is confirmed broken, and the flags round (the lineage a heal
needs) runs at once.

It follows what is declared: each flags round first looks at the inventory file (pdctl.ops.watch_follow); a changed
one is judged against from that round on ({"event": "declared"}), its cadences and window included.

After each round: the new timeline lines (typed, pdctl.checks.watch_events) go to every sink (`on_lines`), then every
hook (`hooks`: the heal's seam) is called as hook(watch, cadence) in that round's thread; a hook's exception becomes
an {"event": "error"} line and the watch goes on. A hook says its own lines with `watch.emit(event)`.

Its outputs are fallible (pdctl.ops.watch_outputs): a sink that raises fails alone; its failure (and later its
recovery) is an {"event": "output"} line to the other sinks and in the exporter's pdctl_output_ok; the rounds, the
exporter and the hooks go on. A sink whose reader went away for good (ReaderGone: stdout's, `| head -1`) ends the
watch as a run-out --for would, with its verdict.

Its own restart. Recovered from the deployment, never assumed: the processes and their start times (read every
flags round), the co-restart lineage record (read from the prefill host every flags round), every check's status
(the first round of each cadence), a pin's start (the inflight judge's evidence: no progress for so long, once a
full window is sampled). Lost: the failure counts before the watch started (pdctl_kv_failures_since_start starts at
0: "since start" is this watch's start), a pair's run of consecutive failures, the pdctl_heals_total counts (the
heal budget and a red heal are read back from the audit log), and the first inflight window (the verdict is
inconclusive until one window is sampled).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from contextlib import AbstractContextManager, ExitStack
from typing import Callable, Sequence

from pdctl.checks.pairs import pair_name
from pdctl.checks.result import CheckResult, Status
from pdctl.checks.watch_events import CanaryAsked, Redeclared, RoundError, TimelineEvent, TimelineSink
from pdctl.checks.watch_outputs import OutputLedger
from pdctl.checks.watch_schedule import CADENCES, RUN, SKIP, CadenceClock, cadence_periods
from pdctl.checks.watch_state import WatchState
from pdctl.errors import UsageError
from pdctl.ops.context import Deployment
from pdctl.ops.watch_follow import InventoryFollower
from pdctl.ops.watch_outputs import Outputs
from pdctl.ops.watch_rounds import ROUNDS, Seen
from pdctl.services.sdnotify import READY, STOPPING, WATCHDOG, Notifier

TICK_S = 0.5  # the longest the loop sleeps: how soon it sees a stop, the end of --for, or --once done
CONFIRM_S = 5.0  # a failed pair canary is sent again this soon: three in a row are a page, not three periods
ASKED_LINE_EVERY_S = 60.0  # a canary asked again for the same reason is said at most this often
PING_SHARE = 0.25  # a watchdog ping at most every quarter of WatchdogSec (systemd advises under half)
Hook = Callable[["Watch", str], None]


@dataclass
class WatchResult:
    deployment: str
    seconds: float
    stopped_by: str = ""  # "" (ran out: --for or --once), "SIGINT (Ctrl-C)", "SIGTERM", ...
    state: WatchState | None = None
    reader_gone: bool = False  # ended because stdout's reader went away (not an interrupt: the verdict stands)
    outputs: OutputLedger | None = None  # how its outputs fared
    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        return self.exit_code() == 0  # an interrupted watch (130) is never ok, whatever it saw until then

    def exit_code(self) -> int:
        return 130 if self.stopped_by else (self.state.exit_code() if self.state else 3)


@dataclass
class Watch:
    dep: Deployment
    on_lines: list[TimelineSink] = field(default_factory=list)
    hooks: list[Hook] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        s = self.dep.inv.watch
        self.state = WatchState(self.dep.inv.name, self.wall(), inflight_window_s=s.inflight_window)
        self.lock = threading.RLock()  # state changes, and the exporter's reads of it
        self.clocks = {name: CadenceClock(name, every) for name, every in cadence_periods(s).items()}
        self.finished = 0  # rounds finished (done or raised): what the watchdog pings follow
        self.first_finished: set[str] = set()
        self.fatal: UsageError | None = None  # a round's configuration error (a key file missing): ends the watch
        self.started_at: dict[str, float] = {}  # cadence -> unix time its last round started
        self.exporter_url = ""  # where its exporter listens (run_watch sets it once serving), "" when none
        self.follower = InventoryFollower.of(self.dep.inv)
        self._opened = ExitStack()  # the deployments opened for a changed inventory, closed when the watch ends
        self._asked_for: float | None = None  # the newest suspect failure a canary round was asked for
        self._open_breakers: set[str] = set()  # the router breakers seen open in the last health round
        self._pairs_began: float | None = None  # clock reading when the last pairs round began
        self._said_asked: dict[str, float] = {}  # a canary's reason -> clock reading its line was last written
        self._stop = threading.Event()
        # its sinks, each fallible: a failure is an output line; a reader gone for good stops the watch
        self.outputs = Outputs(
            self.on_lines, self.state.deployment, self.lock, self.wall, on_reader_gone=self._stop_set
        )

    # -- the loop ----------------------------------------------------------------------------------------------
    def run(
        self,
        *,
        stop: threading.Event | None = None,
        for_s: float | None = None,
        once: bool = False,
        notifier: Notifier | None = None,
    ) -> WatchResult:
        """Watch until `stop` is set, `for_s` seconds passed, or (with `once`) every cadence completed a round and
        the inflight window is full; a round's UsageError (a configuration no round can get past, e.g. a key file
        missing) ends it and is raised here (exit 2); Ctrl-C / SIGTERM (KeyboardInterrupt in this thread) stops it
        at the next statement: the result says by what (exit 130). Rounds still running are left to finish on
        their own (daemon threads, each bounded by its own timeouts): the stop takes at most TICK_S.

        `notifier` (systemd's sd_notify, a no-op outside a unit): READY=1 once every cadence finished its first
        round, WATCHDOG=1 from this loop only when rounds finished since the last ping (a wedged loop, or every
        round hung, lets the watchdog fire), STOPPING=1 on the way out."""
        from pdctl.ops.fanout import DaemonPool

        stop = self._stop = stop or self._stop
        started = self.clock()
        result = WatchResult(self.dep.inv.name, 0.0, state=self.state, outputs=self.outputs.ledger)
        pool = DaemonPool(len(CADENCES))
        pulse = _Pulse(notifier or Notifier())
        try:
            while not stop.is_set():
                now = self.clock()
                if for_s is not None and now - started >= for_s:
                    break
                if once and self.once_done():
                    break
                for clock in self.clocks.values():
                    if once and self.state.rounds.get(clock.name) and clock.name != "inflight":
                        continue  # --once: one round of each, the inflight cadence until its window is full
                    act = clock.tick(now)
                    if act == RUN:
                        pool.submit(self._round, clock)
                    elif act == SKIP:
                        with self.lock:
                            line = self.state.round_skipped(clock.name, self.wall())
                        self.emit(line)
                with self.lock:
                    finished, first = self.finished, len(self.first_finished)
                pulse.beat(self.clock(), finished, first == len(CADENCES))
                wait = min(c.wait_s(self.clock()) for c in self.clocks.values())
                stop.wait(min(max(wait, 0.01), TICK_S))
        except KeyboardInterrupt as e:
            result.stopped_by = getattr(e, "signal_name", None) or "SIGINT (Ctrl-C)"
        finally:
            result.reader_gone = self.outputs.reader_gone
            pulse.notifier.notify(STOPPING)
            pool.shutdown(wait=False, cancel_futures=True)
            self._opened.close()
        result.seconds = self.clock() - started
        if self.fatal is not None and not result.stopped_by:
            raise self.fatal
        return result

    def once_done(self) -> bool:
        """--once: every cadence ended a round or raised (a raising round is not retried for ever), and the
        inflight window is full unless its round raised."""
        with self.lock:
            infos = [self.state.rounds.get(c) for c in CADENCES]
            if not all(i is not None and (i.rounds or i.error) for i in infos):
                return False
            inflight = self.state.inflight
            return self.state.rounds["inflight"].error is not None or inflight is None or inflight.conclusive

    def _round(self, clock: CadenceClock) -> None:
        t0 = self.clock()
        lines: list[TimelineEvent]
        with self.lock:
            started = self.started_at[clock.name] = self.wall()
            if clock.name == "pairs":
                self._pairs_began = t0
        try:
            if clock.name == "flags":
                self._emit(self.follow_declared())
            seen = ROUNDS[clock.name](self.dep)
            with self.lock:
                lines = self.apply(clock.name, seen, self.wall(), started=started)
                lines.append(self.state.round_done(clock.name, self.wall(), self.clock() - t0))
                lines += self.follow_up(clock.name, seen)
        except UsageError as e:  # no later round can do better: the watch ends with it (exit 2), said first here
            lines = [self._error_line(clock.name, e)]
            with self.lock:
                self.fatal = self.fatal or e
            self._stop.set()
        except Exception as e:  # a bug or an unmapped failure: said in the timeline, the watch goes on
            error = self._error_line(clock.name, e)
            lines = [error]
            with self.lock:  # its checks are not known meanwhile: the verdict reads unknown (exit 3)
                self.state.round_failed(clock.name, error.observed)
        finally:
            clock.finished()
            with self.lock:
                self.finished += 1
                self.first_finished.add(clock.name)
        try:
            self._emit(lines)  # never raises for a sink's failure (said as an output line): the hooks run anyway
        finally:
            for hook in list(self.hooks):
                try:
                    hook(self, clock.name)
                except Exception as e:
                    self.emit(self._error_line(clock.name, e, what="hook"))

    def apply(self, cadence: str, seen: Seen, t: float, *, started: float | None = None) -> list[TimelineEvent]:
        """Fold one round (started at `started`, unix time) into the state (the caller holds the lock); the
        timeline lines it made."""
        st = self.state
        st.canary_tokens += seen.canary_tokens
        if cadence == "inflight":
            if seen.point is None:  # a host did not answer: no sample, the check unknown
                return st.apply_checks("inflight", [], t, unknown=seen.unknown)
            lines = st.apply_point(seen.point, t)
            # the transfer check follows the counters each sample carries; a worker not read is judged by the round
            # (ops/layers/inflight.py): failed when its host answers, as in final-health; unknown when it does not
            checks = st.transfer_checks(seen.point.errors) + seen.checks
            return lines + st.apply_checks("inflight", checks, t, unknown=seen.unknown)
        lines = st.apply_processes(seen.processes, t) if seen.processes else []
        if seen.change is not None:
            lines += st.apply_change(seen.change, t)
        if seen.pairs:
            lines += st.apply_pairs(seen.pairs, t, started=started)
        if seen.hazards is not None:
            lines += st.apply_hazards(seen.hazards, t)
        return lines + st.apply_checks(cadence, seen.checks, t, unknown=seen.unknown)

    def follow_up(self, cadence: str, seen: Seen) -> list[TimelineEvent]:
        """After a round (the caller holds the lock): the canary rounds its findings ask for, and their lines."""
        st, pairs = self.state, self.clocks["pairs"]
        if cadence == "pairs":
            if st.unconfirmed_failures():
                pairs.due_in(CONFIRM_S, self.clock())
                self.clocks["flags"].due_now()  # the lineage a heal of this pair needs, read now
            return []
        why = ""
        if cadence == "inflight":
            newest = st.failures.newest_pending()
            last = self.started_at.get("pairs")
            if newest is not None and (last is None or newest > last) and newest != self._asked_for:
                self._asked_for = newest
                why = "KV failures counted on " + ", ".join(st.failures.suspects())
        elif cadence == "e2e" and any(c.status is Status.FAIL for c in seen.checks):
            why = "the router's canary failed"
        elif cadence == "health":
            opened = {f"{c.target}: {c.name}" for c in seen.checks if is_open_breaker(c)}
            new, self._open_breakers = opened - self._open_breakers, opened
            if new:
                why = "a router breaker opened (" + "; ".join(sorted(new)) + ")"
        if not why or pairs.running:
            return []
        # at once, but never closer than CONFIRM_S after the last pairs round began: failures that keep coming
        # (a broken pair under load) must not turn the canary into a storm of its own
        last_began = self._pairs_began
        pairs.due_in(0.0 if last_began is None else max(0.0, last_began + CONFIRM_S - self.clock()), self.clock())
        said = self._said_asked.get(why.split(" (", 1)[0])
        if said is not None and self.clock() - said < ASKED_LINE_EVERY_S:
            return []  # said recently: the timeline is for changes, not for every poke
        self._said_asked[why.split(" (", 1)[0]] = self.clock()
        return [CanaryAsked(self.wall(), st.deployment, why)]

    def follow_declared(self) -> list[TimelineEvent]:
        """Judge against the inventory file as it is now, when it changed (pdctl.ops.watch_follow)."""
        got = self.follower.look()
        if got is None:
            return []
        if isinstance(got, str):
            return [Redeclared(self.wall(), self.state.deployment, False, got)]
        dep = self._opened.enter_context(Deployment(got.inv, self.dep.progress))
        inv = got.inv
        labels = {inv.label(role, i) for role, i, _ in inv.instances()}
        pairs = {pair_name(i, j) for i in range(len(inv.roles.prefill)) for j in range(len(inv.roles.decode))}
        with self.lock:
            self.dep = dep
            for name, every in cadence_periods(inv.watch).items():
                self.clocks[name].every = every
            self.state.inflight_window_s = inv.watch.inflight_window
            self.state.keep_declared(labels, pairs)
        what = ", ".join(got.changed) or "formatting only"
        return [Redeclared(self.wall(), self.state.deployment, True, f"{inv.source} changed ({what}): judged from now")]

    # -- what the heal and the screen use ----------------------------------------------------------------------
    @property
    def timeline(self) -> str | None:
        """Where its timeline is written: the `target` of the sink that writes one (pdctl.render.watch_timeline's
        TimelineWriter: a file, or "-" for stdout), None when no sink does."""
        for sink in self.on_lines:
            target = getattr(sink, "target", None)
            if isinstance(target, str):
                return target
        return None

    def emit(self, event: TimelineEvent) -> None:
        """One line to every sink (a hook's own, e.g. the heal's HealEvent, stamped with `watch.wall()`)."""
        self._emit([event])

    def record_heal(self, outcome: str) -> None:
        """Count a heal (outcome: done, failed, refused, dry) for pdctl_heals_total."""
        with self.lock:
            self.state.heals[outcome] = self.state.heals.get(outcome, 0) + 1

    def _emit(self, lines: list[TimelineEvent]) -> None:
        self.outputs.emit(lines)  # raises nothing a sink raised (pdctl.ops.watch_outputs)

    def _stop_set(self) -> None:
        self._stop.set()  # the Event run() waits on (it may be the caller's, set at run())

    def _error_line(self, cadence: str, e: BaseException, what: str = "round") -> RoundError:
        text = (getattr(e, "message", None) or str(e) or type(e).__name__).splitlines()[0]
        return RoundError(self.wall(), self.state.deployment, cadence, f"{what} raised {type(e).__name__}: {text}")


def is_open_breaker(c: CheckResult) -> bool:
    """A router's breaker check (pdctl.checks.router_state) that reads open."""
    return c.layer == "health" and c.name.startswith("breaker ") and c.status is Status.FAIL


class _Pulse:
    """What the loop tells systemd: READY once, then WATCHDOG while the finished-round count moves."""

    def __init__(self, notifier: Notifier):
        self.notifier, self.ready = notifier, False
        self.pinged_at: float | None = None
        self.pinged_count = 0

    def beat(self, now: float, finished: int, all_first_done: bool) -> None:
        n = self.notifier
        if not n.active:
            return
        if not self.ready and all_first_done:
            self.ready = n.notify(READY + "\nSTATUS=watching: every cadence ran a round")
        if n.watchdog_s is None or finished == self.pinged_count:
            return  # no round finished since the last ping: no ping (the watchdog may then fire)
        if self.pinged_at is None or now - self.pinged_at >= n.watchdog_s * PING_SHARE:
            if n.notify(WATCHDOG):
                self.pinged_at, self.pinged_count = now, finished


def run_watch(
    dep: Deployment,
    *,
    on_lines: Sequence[TimelineSink] = (),
    hooks: Sequence[Hook] = (),
    for_s: float | None = None,
    once: bool = False,
    stop: threading.Event | None = None,
    serve: tuple[str, int] | None = None,
    screen: Callable[[Watch], AbstractContextManager[object]] | None = None,
    notifier: Notifier | None = None,
) -> WatchResult:
    """Build a Watch, serve its exporter on `serve` (host, port) and show `screen(watch)` (a context manager,
    e.g. the live view) while it runs, run it. Raises UsageError when the exporter's address cannot be bound
    (before any round)."""
    from contextlib import nullcontext

    from pdctl.ops.watch_exporter import serve_exporter

    w = Watch(dep, on_lines=list(on_lines), hooks=list(hooks))
    server = serve_exporter(w, *serve) if serve is not None else None
    w.exporter_url = server.url if server is not None else ""
    try:
        with screen(w) if screen is not None else nullcontext():
            return w.run(stop=stop, for_s=for_s, once=once, notifier=notifier)
    finally:
        if server is not None:
            server.close()
