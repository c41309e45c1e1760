"""The flags pdctl itself puts on a role's command line, each with the inventory field it comes from. A role's
`args` may not set one (`args_conflicts`, refused when the inventory loads): the role would run otherwise than pdctl
probes, routes and checks. launch.base_flags and launch.role_argv write them; a test keeps the two lists the same.

Only names here, no Inventory: the inventory's own validation asks this module, and launch imports the inventory."""

from __future__ import annotations

from typing import Iterable


def managed_flags(role: str, index: int, *, model_path: bool) -> dict[str, str]:
    """flag -> where its value comes from, for instance `index` of `role` (`model_path`: the inventory sets one,
    so pdctl passes --model-path)."""
    at = f"roles.{role}.{index}"
    if role == "router":  # the workers it routes to are the inventory's prefills and decodes
        return {
            "--host": f"{at}.listen_host",
            "--port": f"{at}.port",
            "--pd-disaggregation": "pdctl, always on",
            "--prometheus-host": f"{at}.listen_host (the host's address for a wildcard)",
            "--prefill": "roles.prefill",
            "--decode": "roles.decode",
        }
    out = {"--model-path": "model_path"} if model_path else {}
    out.update(
        {
            "--served-model-name": "served_model_name",
            "--disaggregation-mode": f"the role ({role})",
            "--host": f"{at}.listen_host",
            "--port": f"{at}.port",
            "--disaggregation-transfer-backend": "transfer_backend",
            "--enable-metrics": "pdctl, always on (final-health reads /metrics)",
        }
    )
    if role == "prefill":
        out["--disaggregation-bootstrap-port"] = f"{at}.bootstrap_port"
    return out


def args_conflicts(role: str, index: int, args: Iterable[str], *, model_path: bool) -> list[tuple[str, str]]:
    """(args key, why) for each key of a role's `args` that would set a flag pdctl sets itself: the flag,
    `--flag=value`, or an abbreviation of it (SGLang's, the bundled engine's and the router's argparse accept a
    unique prefix, and SGLang's `--model` alias of `--model-path` is one). Pure."""
    managed = managed_flags(role, index, model_path=model_path)
    out = []
    for key in args:
        name = key.partition("=")[0]
        hits = [flag for flag in managed if len(name) > 2 and flag.startswith(name)]
        if name in managed:
            out.append((key, f"set by pdctl from {managed[name]}; use that"))
        elif hits:
            out.append((key, f"the engine may read it as {hits[0]}, set by pdctl from {managed[hits[0]]}; use that"))
    return out
