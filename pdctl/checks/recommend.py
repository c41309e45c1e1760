"""The one command to run next after a failing final-health: triage's recommendation from the same results, so
final-health's first hint and triage's action agree (a lone restart with failing transfers: `pdctl restart
--pair`, not `pdctl status`). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pdctl.checks.result import CheckResult
from pdctl.checks.triage import ServiceState, TriageObservations, judge_triage
from pdctl.checks.triage_finding import recommended_step


def next_steps(layers: Mapping[str, list[CheckResult]]) -> list[str]:
    """Every command to run next, triage's recommendation first, then the failed checks' own next steps in their
    order, each once. Empty when nothing failed. Pure."""
    failures = [r for rs in layers.values() for r in rs if r.failed]
    if not failures:
        return []
    obs = TriageObservations(services=services_seen(layers))
    obs.take_final_health(layers)
    first = recommended_step(judge_triage(obs))
    return list(dict.fromkeys([s for s in [first] + [r.next_step for r in failures] if s]))


_LABEL = re.compile(r"^(prefill|decode|router)\[(\d+)\]@")


def services_seen(layers: Mapping[str, list[CheckResult]]) -> dict[str, ServiceState]:
    """What final-health's results say of each role instance's process: stopped where the flags layer found no
    live main process, else not known (final-health does not ask the service manager). Pure."""
    services: dict[str, ServiceState] = {}
    for r in (r for rs in layers.values() for r in rs):
        m = _LABEL.match(r.target)
        if m is None:
            continue
        sv = services.setdefault(r.target, ServiceState(m.group(1), int(m.group(2)), "", None))
        if r.data.get("running") is False:
            sv.active, sv.service, sv.detail = False, str(r.data.get("service", "")), r.observed
    return services
