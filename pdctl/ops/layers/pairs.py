"""The pairs layer (optional): a canary straight to every prefill x decode pair, sent the way the router sends one,
content checked (ops/pairs.py sends, checks/pairs.py judges). Sequential in final-health, after the others: its
canaries would otherwise show in the inflight window."""

from __future__ import annotations

from pdctl.checks.result import CheckResult
from pdctl.errors import PdctlError
from pdctl.ops.context import Deployment
from pdctl.ops.layers.base import Gathering, LayerDef, register
from pdctl.checks.pairs import pair_name
from pdctl.ops.layers.seen import Seen, unreachable_hosts, why


def _run(g: Gathering) -> list[CheckResult]:
    from pdctl.ops.pairs import pairs_layer

    return pairs_layer(g.dep)


def pairs_round(dep: Deployment) -> Seen:
    """A canary for every prefill x decode pair whose two hosts answer (ops.pairs.verify_pairs, its lineage marking
    left to the flags round): a host that does not answer (a refused host key included, as in every round) makes
    ITS pairs unknown, and every other pair is canaried and judged, so a broken pair on hosts that answer fails."""
    from pdctl.checks.pairs import UNKNOWN, pair_check
    from pdctl.ops.pairs import verify_pairs

    inv = dep.inv
    names = {
        (inv.label("prefill", i), inv.label("decode", j)): pair_name(i, j)
        for i in range(len(inv.roles.prefill))
        for j in range(len(inv.roles.decode))
    }
    try:
        rep = verify_pairs(dep, lineage=False, down=unreachable_hosts(dep, roles=("prefill", "decode")))
    except PdctlError as e:  # no pair could be asked (every prefill's or decode's host is silent, a key refused)
        reason = f"unknown: {why(e)}"
        return Seen(unknown={name: reason for name in names.values()}, pairs=[(p, d, UNKNOWN, None) for p, d in names])
    seen = Seen(canary_tokens=sum(r.generated_tokens for r in rep.pairs))
    for r in rep.pairs:
        p, d = rep.prefills[r.prefill], rep.decodes[r.decode]
        ms = r.kv_transfer_ms if r.kv_transfer_ms is not None else r.decode_ms
        seen.pairs.append((p, d, r.status, None if ms is None else ms / 1000.0))
        if r.status == UNKNOWN:
            seen.unknown[r.name] = f"unknown: {r.found}"
        else:
            seen.checks.append(pair_check(r, p, d))
    return seen


register(LayerDef("pairs", run=_run, round=pairs_round))
