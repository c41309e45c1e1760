"""Observe a server's /metrics: one GET, then the pure parser. The judging lives in transfer.py and inflight.py."""

from __future__ import annotations

import time

from pdctl.checks.http_util import client, describe_error, join, remote_url, request_name
from pdctl.checks.metric_names import ENABLE_METRICS_HINT
from pdctl.checks.metrics import MetricSet, parse_metrics
from pdctl.errors import CheckFailed, UnreachableError


class MetricsUnavailable(CheckFailed):
    """The server answered but served no metrics (SGLang without --enable-metrics answers 404)."""

    def __init__(self, message: str, *, url: str, status_code: int, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.url = url
        self.status_code = status_code


def fetch_metrics(base_url: str, timeout: float = 5.0, families=None) -> MetricSet:
    """GET base_url/metrics and parse it (only the metric `families` named, when given). Changes nothing on the
    server.

    Raises UnreachableError(target=url) when the server cannot be reached or does not answer in `timeout`;
    MetricsUnavailable (exit 1, hint --enable-metrics) on a non-200 answer; MetricsParseError on unreadable text.
    """
    url, name = join(base_url, "/metrics"), request_name(base_url, "/metrics")  # a role, not a tunnel's port
    c = client()
    t0 = time.monotonic()
    try:
        r = c.get(url, timeout=timeout)
    except Exception as e:
        raise UnreachableError(
            f"cannot read {name}: {describe_error(e, timeout, base_url, since=t0)}",
            target=remote_url(base_url, "/metrics"),
        ) from None
    if r.status_code != 200:
        hint = ENABLE_METRICS_HINT if r.status_code == 404 else None
        raise MetricsUnavailable(
            f"{name} answered HTTP {r.status_code}",
            url=remote_url(base_url, "/metrics"),
            status_code=r.status_code,
            hint=hint,
        )
    return parse_metrics(r.text, families)
