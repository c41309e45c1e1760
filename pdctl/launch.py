"""Render each role's launch command and env from the inventory, for the bundled engine and for real SGLang.

The command lines use SGLang's own flag names, so the same inventory drives `engine: bundled` on a laptop and
`engine: sglang` in production; only the module that is launched differs.
"""

from __future__ import annotations

import re
import sys
from typing import Mapping

from pdctl.engines import engine_kind
from pdctl.errors import InventoryError
from pdctl.inventory import ArgValue, Inventory
from pdctl.services.base import ServiceSpec
from pdctl.role_ref import RoleRef


def server_modules() -> set[str]:
    """The module of every registered engine kind (pdctl.engines)."""
    from pdctl.engines import engine_kinds

    return {k.module for k in engine_kinds().values()}


def router_modules() -> set[str]:
    """The module of every registered router kind (pdctl.routers)."""
    from pdctl.routers import router_kinds

    return {k.module for k in router_kinds().values()}


# what argparse takes for a value although it starts with "-" (its own negative-number rule)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def flag_tokens(args: dict[str, ArgValue]) -> list[str]:
    """{"--a": True, "--b": 96, "--c": [1, 2], "--d": False} -> ["--a", "--b", "96", "--c", "1", "2"].

    A value starting with "-" is one token `--flag=value` (`--api-key=--x`): argparse (SGLang's, the bundled
    engine's, the router's) would read `--api-key --x` as two flags and refuse to start. A list of several values
    cannot say that, so one of its elements starting with "-" (other than a negative number) is a ValueError
    naming the flag, raised before anything is launched."""
    out: list[str] = []
    for flag, value in args.items():
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            texts = [str(v) for v in value]
            dashed = [t for t in texts if t.startswith("-") and not _NEGATIVE_NUMBER.match(t)]
            if len(texts) == 1 and texts[0].startswith("-"):
                out.append(f"{flag}={texts[0]}")
            elif dashed:
                raise ValueError(
                    f"{flag}: a list element starts with '-', which SGLang's argument parser would "
                    "read as a flag; give a single value (rendered as FLAG=VALUE) or drop the '-'"
                )
            else:
                out.append(flag)
                out.extend(texts)
        elif str(value).startswith("-"):
            out.append(f"{flag}={value}")
        else:
            out.extend([flag, str(value)])
    return out


def python_for(inv: Inventory, host_name: str) -> str:
    """The interpreter a host's roles run under when nothing is installed there yet: the inventory's
    `hosts.<name>.python`, else the one of a first deploy (pdctl's own for a local host, `python3` over SSH).
    Once installed, deploy keeps the recorded one (`recorded_python`) unless the inventory declares another."""
    host = inv.hosts[host_name]
    if host.python:
        return host.python
    return sys.executable if host.runs_here else "python3"


def recorded_python(spec: ServiceSpec | None) -> str | None:
    """The interpreter an installed spec records: argv[0] of a command pdctl renders (`PY -m <engine or router
    module> ...`); None for no spec or another shape (a unit written by hand)."""
    modules = {*server_modules(), *router_modules()}
    if spec is None or len(spec.argv) < 3 or spec.argv[1] != "-m" or spec.argv[2] not in modules:
        return None
    return spec.argv[0]


def resolved_pythons(inv: Inventory, installed: Mapping[RoleRef, ServiceSpec | None]) -> dict[RoleRef, tuple[str, str]]:
    """(interpreter, where it comes from) per (role, index), given each role's installed spec (None: none).

    "inventory": hosts.<name>.python is declared (the way to change it); "installed": kept from the role's installed
    spec; "host": recorded by another role on the same host; "default": a first deploy (`python_for`). So the
    interpreter is part of the deployment, never of the environment pdctl happens to run from."""
    on_host: dict[str, str] = {}
    for (role, i), spec in installed.items():
        py = recorded_python(spec)
        if py:
            on_host.setdefault(getattr(inv.roles, role)[i].host, py)
    out: dict[RoleRef, tuple[str, str]] = {}
    for role, i, inst in inv.instances():
        mine = recorded_python(installed.get(RoleRef(role, i)))
        declared = inv.hosts[inst.host].python
        if declared:
            out[RoleRef(role, i)] = (declared, "inventory")
        elif mine:
            out[RoleRef(role, i)] = (mine, "installed")
        elif inst.host in on_host:
            out[RoleRef(role, i)] = (on_host[inst.host], "host")
        else:
            out[RoleRef(role, i)] = (python_for(inv, inst.host), "default")
    return out


def worker_url(inv: Inventory, role: str, index: int, from_host: str) -> str:
    inst = getattr(inv.roles, role)[index]
    return f"http://{inv.address_from(inst.host, from_host)}:{inst.port}"


def base_flags(inv: Inventory, role: str, index: int) -> dict[str, ArgValue]:
    """The flags pdctl itself sets for a role (before the inventory's own `args`)."""
    inst = getattr(inv.roles, role)[index]
    if role == "router":
        # its metrics port would otherwise listen on every interface (smg: the unspecified address of --host's family)
        return {"--host": inst.listen_host, "--port": inst.port, "--prometheus-host": metrics_host(inv, index)}
    flags: dict[str, ArgValue] = {}
    if inv.model_path:
        flags["--model-path"] = inv.model_path
    flags.update(
        {
            "--served-model-name": inv.served_model_name,
            "--disaggregation-mode": role,
            "--host": inst.listen_host,
            "--port": inst.port,
            "--disaggregation-transfer-backend": inv.transfer_backend,
            "--enable-metrics": True,
        }
    )
    if role == "prefill":
        flags["--disaggregation-bootstrap-port"] = inv.bootstrap_port(inst)
    return flags


def metrics_host(inv: Inventory, index: int) -> str:
    """Where router[index]'s metrics port listens: its listen_host, or for a wildcard the host's own address
    (loopback on a local host), never every interface."""
    inst = inv.roles.router[index]
    if inst.listen_host not in ("0.0.0.0", "::", ""):
        return inst.listen_host
    host = inv.hosts[inst.host]
    return "127.0.0.1" if host.runs_here else (host.internal_address or host.address)


def metrics_port(inv: Inventory, index: int) -> int:
    """router[index]'s metrics port: its `--prometheus-port` arg, else the routers' default (29000)."""
    from pdctl.routers import DEFAULT_METRICS_PORT

    value = inv.roles.router[index].args.get("--prometheus-port")
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else DEFAULT_METRICS_PORT


def role_argv(inv: Inventory, role: str, index: int, *, python: str | None = None) -> list[str]:
    """The full launch command of one role instance, unquoted; `python` (the host's resolved interpreter)
    defaults to `python_for`."""
    inst = getattr(inv.roles, role)[index]
    py = python or python_for(inv, inst.host)
    if role == "router":
        argv = [py, "-m", inv.router_kind(index).module, "--pd-disaggregation"]
        for i, p in enumerate(inv.roles.prefill):
            argv += ["--prefill", worker_url(inv, "prefill", i, inst.host), str(inv.bootstrap_port(p))]
        for i, _d in enumerate(inv.roles.decode):
            argv += ["--decode", worker_url(inv, "decode", i, inst.host)]
    else:
        argv = [py, "-m", engine_kind(inv.engine).module]
    try:
        return argv + flag_tokens({**base_flags(inv, role, index), **inst.args})
    except ValueError as e:
        raise InventoryError(f"{inv.source}: roles.{role}[{index}].args.{e}") from None


def role_env(inv: Inventory, role: str, index: int) -> dict[str, str]:
    inst = getattr(inv.roles, role)[index]
    env = dict(inst.env)
    if role != "router" and inst.listen_host in ("0.0.0.0", "::", ""):
        # Peers on other hosts dial the address a worker advertises (SGLang's SGLANG_HOST_IP); a wildcard is not one.
        host = inv.hosts[inst.host]
        env.setdefault("SGLANG_HOST_IP", host.internal_address or host.address)
    if inv.engine == "bundled":
        # Two workers and a router share few cores: keep torch's thread pools small unless told otherwise.
        env.setdefault("OMP_NUM_THREADS", "1")
        if role != "router" and single_kv_host(inv):
            # KV never leaves this host, so UCX (under NIXL) must not open sockets on its external interfaces;
            # a multi-host deployment names its device in the role's env (docs/engine.md).
            env.setdefault("UCX_NET_DEVICES", "lo")
    return env


def single_kv_host(inv: Inventory) -> bool:
    """True when every prefill and decode instance runs on one host (the embedded default, a laptop, tests)."""
    return len({i.host for i in [*inv.roles.prefill, *inv.roles.decode]}) <= 1


def service_spec(inv: Inventory, role: str, index: int, *, python: str | None = None) -> ServiceSpec:
    inst = getattr(inv.roles, role)[index]
    return ServiceSpec(
        name=inv.service_name(role, index),
        argv=tuple(role_argv(inv, role, index, python=python)),
        env=role_env(inv, role, index),
        workdir=inv.hosts[inst.host].workdir,
        description=f"pdctl {inv.name} {role}[{index}] ({inv.engine})",
    )


def declared_flags(inv: Inventory, role: str, index: int) -> dict[str, ArgValue]:
    """What final-health expects to find on the live cmdline: pdctl's flags, the role's args, final_health.expect."""
    inst = getattr(inv.roles, role)[index]
    expect = inv.final_health.expected(role)
    return {**base_flags(inv, role, index), **inst.args, **(expect.flags if expect else {})}


def declared_env(inv: Inventory, role: str, index: int) -> dict[str, str]:
    inst = getattr(inv.roles, role)[index]
    expect = inv.final_health.expected(role)
    return {**inst.env, **(expect.env if expect else {})}
