"""Scrubbing a playbook run's secret values: which vars are secret, the set of values to scrub (the inventory's and
the secret vars'), and masked copies of step args and outcomes. Pure; nothing here prints."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from pdctl.playbook.outcome import Data, StepOutcome
from pdctl.secrets import inventory_secrets, url_value_secrets

if TYPE_CHECKING:
    from pdctl.inventory import Inventory


def mask_shown(value: Data, secrets: frozenset[str], key: str = "") -> Data:
    """Step args as the plan shows them: a secret-named key's value is MASK, every string scrubbed by value."""
    from pdctl.secrets import MASK, is_secret_name, mask_text

    if isinstance(value, dict):
        return {k: mask_shown(v, secrets, k) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_shown(v, secrets, key) for v in value]
    if key and is_secret_name(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, str):
        return mask_text(value, secrets)
    if not isinstance(value, bool) and str(value) in secrets:  # a secret var that YAML read as a number
        return MASK
    return value


def secret_var_names(scope_vars: Mapping[str, Data], marked: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The vars whose values are secret: a secret-looking name (`api_token`), or marked with --secret-var."""
    from pdctl.secrets import is_secret_name

    return {k for k in scope_vars if k in marked or is_secret_name(k)}


def run_secrets(inv: Inventory, scope_vars: Mapping[str, Data], names: set[str]) -> frozenset[str]:
    """The inventory's secret values and the secret vars' values, each also as shell-quoted (a `${...}` inside a
    shell command is substituted quoted, and a quoted value with a `'` in it no longer contains the raw text)."""
    from pdctl.shell import quote

    values = inventory_secrets(inv) | {
        str(scope_vars[k]) for k in names if scope_vars[k] not in (None, "", True, False)
    }
    # a URL's password in any var, whatever the var's name (`--var "c=redis://u:pw@h/x"`)
    values |= {p for v in scope_vars.values() if isinstance(v, str) for p in url_value_secrets(v)}
    return frozenset(values | {quote(v) for v in values})


def mask_outcome(out: StepOutcome, secrets: Iterable[str]) -> StepOutcome:
    """A copy of the outcome with its texts and data scrubbed of the run's secret values (the health report stays:
    its env and flags come masked from /proc)."""
    from pdctl.secrets import mask_nested, mask_text

    def masked(text: Optional[str]) -> Optional[str]:
        return mask_text(text, secrets) if text else text

    return dataclasses.replace(
        out,
        summary=mask_text(out.summary, secrets),
        error=masked(out.error),
        stdout=mask_text(out.stdout, secrets),
        stderr=mask_text(out.stderr, secrets),
        recommendation=masked(out.recommendation),
        data=mask_nested(out.data, secrets),
    )
