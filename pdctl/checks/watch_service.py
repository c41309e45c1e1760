"""Is the watch service doing its job: its process runs, its exporter answers, and its rounds are recent. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from pdctl.checks.result import CheckResult, Status

LAYER = "watch-service"
#: a round is late after this many of the fastest cadence's periods, plus a round's own slack
LATE_PERIODS = 3
LATE_SLACK_S = 10.0


@dataclass(frozen=True)
class WatchServiceSeen:
    """What `pdctl watch --status` read: the service's state and one scrape of its exporter."""

    installed: bool
    active: bool
    pid: int | None
    detail: str  # the manager's words (active/running, stale pidfile: ...)
    restarts: int | None  # systemd's NRestarts (None for a pidfile service)
    exporter_url: str
    scrape_error: str = ""  # why the scrape failed ("" when it answered)
    last_round: float | None = None  # newest pdctl_round_last_timestamp_seconds (unix time), None: no round yet
    now: float = 0.0  # unix time of the scrape


def judge_watch_service(seen: WatchServiceSeen, fastest_every_s: float, *, name: str) -> list[CheckResult]:
    """Three checks: the service runs, its exporter answers, a round completed within LATE_PERIODS of the
    fastest cadence (+ LATE_SLACK_S). The later ones are skipped once an earlier one failed."""
    out = []
    if not seen.installed:
        return [
            CheckResult(
                LAYER,
                name,
                "service",
                Status.FAIL,
                "not installed",
                "installed and running",
                next_step="pdctl watch --install -i INVENTORY",
            )
        ]
    restarts = f", restarted {seen.restarts}x by systemd" if seen.restarts else ""
    if not seen.active:
        return [
            CheckResult(
                LAYER,
                name,
                "service",
                Status.FAIL,
                f"not running ({seen.detail})",
                "running",
                next_step="pdctl watch --install again (starts it), or see its log",
            )
        ]
    out.append(
        CheckResult(
            LAYER,
            name,
            "service",
            Status.PASS,
            f"running, pid {seen.pid}{restarts}",
            "running",
            data={"pid": seen.pid, "restarts": seen.restarts},
        )
    )
    if seen.scrape_error:
        out.append(CheckResult(LAYER, name, "exporter", Status.FAIL, seen.scrape_error, f"{seen.exporter_url} answers"))
        return out
    out.append(CheckResult(LAYER, name, "exporter", Status.PASS, "answers", f"{seen.exporter_url} answers"))
    limit = LATE_PERIODS * fastest_every_s + LATE_SLACK_S
    if seen.last_round is None:
        out.append(
            CheckResult(
                LAYER,
                name,
                "rounds",
                Status.WARN,
                "no round completed yet",
                f"a round within {limit:g}s",
                detail="just started, or every round still runs",
            )
        )
        return out
    age = max(0.0, seen.now - seen.last_round)
    ok = age <= limit
    out.append(
        CheckResult(
            LAYER,
            name,
            "rounds",
            Status.PASS if ok else Status.FAIL,
            f"last round {age:.0f}s ago",
            f"a round within {limit:g}s",
            data={"last_round_age_s": round(age, 1)},
            detail="" if ok else "the watch runs but completes no round: see its log",
        )
    )
    return out
