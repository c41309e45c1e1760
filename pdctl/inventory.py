"""The declared deployment: typed models (msgspec Structs), the YAML loader and the embedded default.

An inventory names hosts, the three roles (one or more instances each) and what final-health expects. Errors name
the file, the dotted path to the field and what was expected (InventoryError, exit 2).

msgspec, not pydantic: every pdctl command loads an inventory, and pydantic's import and schema building cost
~130 ms a run where msgspec's cost ~5 ms (docs/performance.md). A check that needs the field it fails on says so
with `field_error`, so the message names the field's whole path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Optional, Union, cast

import msgspec
from msgspec import Meta, field

from pdctl.errors import InventoryError
from pdctl.inventory_env import ENV_NAME, env_field
from pdctl.inventory_base import Cadence, Interval, Port, SafeName, Seconds
from pdctl.inventory_base import Strict as _Strict
from pdctl.inventory_hosts import HOST_TYPES as HOST_TYPES  # the host models: importable from here as before
from pdctl.inventory_hosts import AnyHost, LocalHost, host_hint, with_default_transport
from pdctl.inventory_hosts import Host as Host
from pdctl.inventory_hosts import SshHost as SshHost
from pdctl.struct_errors import field_error, field_errors, validation_problems
from pdctl.yamlfile import load_yaml

if TYPE_CHECKING:
    from pdctl.routers import RouterKind

ROLES = ("prefill", "decode", "router")
RoleName = Literal["prefill", "decode", "router"]
ArgValue = Union[bool, int, float, str, list[Union[int, float, str]]]

# Ports of the seed deployment (and of the embedded default).
DEFAULT_PORTS = {"prefill": 30000, "decode": 30002, "router": 30001}
DEFAULT_BOOTSTRAP_PORT = 8998


class RoleInstance(_Strict, kw_only=True):  # kw_only is per class in msgspec: `port` follows defaults
    """One process of a role on a host."""

    host: str = "local"
    port: Port
    listen_host: str = "127.0.0.1"
    bootstrap_port: Optional[Port] = None  # prefill only
    service: Optional[SafeName] = None  # systemd unit or pidfile name; default pdctl-<name>-<role>-<i>
    args: dict[str, ArgValue] = field(default_factory=dict)  # extra launch flags: {"--flag": value|true}
    env: dict[str, Any] = field(default_factory=dict)  # name -> text once checked (env_as_text)
    ready_timeout: Seconds = 300.0
    kind: Optional[str] = None  # router only: smg (the default) or sglang-router (pdctl.routers)

    def __post_init__(self) -> None:
        from pdctl.host_address import address_problem
        from pdctl.routers import router_kinds

        if self.kind is not None and self.kind not in router_kinds():
            raise field_error(
                "kind", f"unknown router kind {self.kind!r} (choose from {', '.join(sorted(router_kinds()))})"
            )

        problem = address_problem(self.listen_host)  # "" would bind every address: never by accident
        if problem:
            raise field_error("listen_host", problem)
        for flag, val in self.args.items():
            if not flag.startswith("--"):
                raise field_error("args", f"launch flag {flag!r} must start with '--'")
            # a NUL cannot be passed to exec: the role would fail to start mid-deploy
            if any("\0" in x for x in [flag, *(val if isinstance(val, list) else [val])] if isinstance(x, str)):
                raise field_error("args", f"launch flag {flag!r}: contains a NUL character")
        self.env = env_field(self.env)


class Roles(_Strict):
    prefill: Annotated[list[RoleInstance], Meta(min_length=1)]
    decode: Annotated[list[RoleInstance], Meta(min_length=1)]
    router: Annotated[list[RoleInstance], Meta(min_length=1)]


class Probe(_Strict):
    """The end-to-end chat completion of final-health."""

    model: Optional[str] = None  # default: the served model name
    prompt: str = "hi"
    max_tokens: Annotated[int, Meta(ge=1)] = 8
    timeout: Seconds = 30.0


class Expect(_Strict):
    """Flags and env final-health expects on a role beyond those the role declares."""

    flags: dict[str, ArgValue] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = env_field(self.env)


class FinalHealth(_Strict):
    health_timeout: Seconds = 4.0  # the seed's curl -m4
    metrics_timeout: Seconds = 5.0
    probe: Probe = field(default_factory=Probe)
    expect: dict[RoleName, Expect] = field(default_factory=dict)

    def expected(self, role: str) -> Expect | None:
        """What final-health expects of `role` beyond what the role declares, if anything."""
        return self.expect.get(cast(RoleName, role))  # a role name not in ROLES simply has no entry


class SilencedRule(_Strict):
    """A lint rule the operator switched off, with the reason `pdctl lint` shows."""

    rule: str
    reason: Annotated[str, Meta(min_length=1)]
    role: Optional[str] = None  # a role (decode) or instance (decode[0]); default every role

    def __post_init__(self) -> None:
        from pdctl.checks.lint_rules import RULES

        if self.rule not in RULES:
            raise field_error("rule", f"unknown lint rule {self.rule!r} (docs/lint.md lists them)")
        if RULES[self.rule].blocks:
            raise field_error(
                "rule",
                f"lint rule {self.rule!r} cannot be silenced: the command line would not "
                "start (fix it, or pass --skip-lint to deploy/restart once)",
            )


class LintSettings(_Strict):
    """`pdctl lint` settings: env names only a site's own build reads (name -> why) and silenced rules."""

    site_env: dict[str, str] = field(default_factory=dict)
    silence: list[SilencedRule] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, reason in self.site_env.items():
            if not ENV_NAME.fullmatch(name):
                raise field_error("site_env", f"{name!r} is not an env name")
            if not str(reason).strip():
                raise field_error("site_env", f"{name}: give the reason (which build reads it)")


class WatchSettings(_Strict):
    """`pdctl watch` cadences (seconds between rounds of each) and where its exporter listens (docs/watch.md)."""

    health_every: Cadence = 5.0  # /health, router /readiness, the transfer counters
    inflight_interval: Interval = 1.0  # one read of every worker's PD gauges, continuously
    inflight_window: Cadence = 20.0  # the sliding window the inflight verdict judges
    e2e_every: Cadence = 30.0  # a chat completion through each router
    pairs_every: Cadence = 30.0  # a canary for every prefill x decode pair
    flags_every: Cadence = 60.0  # live flags/env and the restart lineage
    listen: str = "127.0.0.1:9464"  # the exporter's HOST:PORT
    heal_pin_after: Cadence = 60.0  # --heal: a pin seen this long is healed
    heal_pair_failures: Annotated[int, Meta(ge=1, le=1000)] = 3  # --heal: a pair failing this many canaries in a row
    heal_max_per_hour: Annotated[int, Meta(ge=1, le=60)] = 2  # --heal: then it alerts and stops acting

    def __post_init__(self) -> None:
        try:
            parse_listen(self.listen)
        except ValueError as e:
            raise field_error("listen", str(e)) from None
        if self.inflight_interval > self.inflight_window:
            raise field_error(
                "inflight_interval",
                f"{self.inflight_interval:g} must be at most inflight_window {self.inflight_window:g}",
            )


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9464' or '[::1]:9464' -> (host, port). Raises ValueError saying what HOST:PORT wants."""
    host, sep, port = str(text).rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"listen {text!r}: expected HOST:PORT with a port 1-65535 (e.g. 127.0.0.1:9464)")
    return host, int(port)


class Inventory(_Strict, kw_only=True, dict=True):  # dict: `source` is set after validation, not a field
    name: SafeName = "local"
    engine: Literal["bundled", "sglang"] = "bundled"
    model_path: Optional[str] = None  # sglang: required; bundled: optional engine checkpoint
    served_model_name: str = "pdctl-tiny"
    transfer_backend: str = "nixl"
    hosts: dict[str, AnyHost] = field(default_factory=lambda: {"local": LocalHost()})
    roles: Roles
    final_health: FinalHealth = field(default_factory=FinalHealth)
    lint: LintSettings = field(default_factory=LintSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)
    source: ClassVar[str] = "<embedded default>"  # the file it came from (set per instance by parse_inventory)

    def __post_init__(self) -> None:
        for role in ROLES:
            for i, inst in enumerate(getattr(self.roles, role)):
                if inst.host not in self.hosts:
                    known = ", ".join(sorted(self.hosts)) or "none"
                    raise field_error(f"roles.{role}.{i}.host", f"unknown host {inst.host!r} (hosts: {known})")
                if role != "prefill" and inst.bootstrap_port is not None:
                    raise field_error(f"roles.{role}.{i}.bootstrap_port", "only prefill has a bootstrap port")
                if role != "router" and inst.kind is not None:
                    raise field_error(
                        f"roles.{role}.{i}.kind", "only a router has a kind (the engine is the inventory's `engine`)"
                    )
        self._check_args()
        self._check_reachable()
        if self.engine == "sglang" and not self.model_path:
            raise field_error("model_path", "required when engine is 'sglang'")
        self._check_ports()

    def _check_ports(self) -> None:
        """Refuse two uses of one port on one host, each clash named under the field that makes it (a prefill's
        `bootstrap_port` also when it is the default) with the field of its other user."""
        seen: dict[tuple[str, int], str] = {}  # (host, port) -> "prefill[0]'s bootstrap_port"
        problems = []
        for role, i, inst in self.instances():
            uses = [("port", inst.port)]
            if role == "prefill":
                uses.append(("bootstrap_port", self.bootstrap_port(inst)))
            for name, p in uses:
                default = " (default)" if name == "bootstrap_port" and inst.bootstrap_port is None else ""
                key = (inst.host, p)
                if key in seen:
                    why = f"port {p}{default} on host {inst.host!r} is also used by {seen[key]}"
                    problems.append(
                        (f"roles.{role}.{i}.{name}", why + ("; set a bootstrap_port per prefill" if default else ""))
                    )
                else:
                    seen[key] = f"{role}[{i}]'s {name}{default}"
        if problems:
            raise field_errors(problems)

    def _check_args(self) -> None:
        """Refuse a role's `args` that would set a flag pdctl sets itself (managed_flags.args_conflicts): a
        prefill's `--port` or `--disaggregation-mode` there would run a process other than the one pdctl probes and
        routes to, and its `--host` would slip past the reachability check. Every such flag is named."""
        from pdctl.managed_flags import args_conflicts

        problems = [
            (f"roles.{role}.{i}.args.{key}", why)
            for role, i, inst in self.instances()
            for key, why in args_conflicts(role, i, inst.args, model_path=bool(self.model_path))
        ]
        if problems:
            raise field_errors(problems)

    def _check_reachable(self) -> None:
        """A role bound to loopback can only be dialled from its own host: refuse an inventory where another
        host's role (or the operator, with http: direct over SSH) would have to reach it."""
        for role, i, inst in self.instances():
            if not _is_loopback(inst.listen_host):
                continue
            dialers = [] if role == "router" else self.instances("router")  # nobody but the operator dials a router
            if role == "prefill":
                dialers += self.instances("decode")
            for r, j, other in dialers:
                if other.host != inst.host:
                    raise field_error(
                        f"roles.{role}.{i}.listen_host",
                        f"{inst.listen_host} is reachable only on host "
                        f"{inst.host!r}, but {r}[{j}] on host {other.host!r} must reach it; listen on 0.0.0.0 or the "
                        "host's address",
                    )
            host = self.hosts[inst.host]
            if not host.runs_here and host.http_route == "direct":
                raise field_error(
                    f"roles.{role}.{i}.listen_host",
                    f"{inst.listen_host} cannot be probed directly on "
                    f"{host.address}; set hosts.{inst.host}.http: tunnel, or listen on the host's address",
                )

    # -- derived views ---------------------------------------------------------------------------------------
    def instances(self, role: str | None = None) -> list[tuple[str, int, RoleInstance]]:
        """(role, index, instance) for every instance, in the safe start order prefill -> decode -> router."""
        out: list[tuple[str, int, RoleInstance]] = []
        for r in ROLES if role is None else (role,):
            out.extend((r, i, inst) for i, inst in enumerate(getattr(self.roles, r)))
        return out

    def router_kind(self, index: int) -> "RouterKind":
        """What router[index] runs: its `kind`, else smg (pdctl.routers.DEFAULT_ROUTER_KIND)."""
        from pdctl.routers import DEFAULT_ROUTER_KIND, router_kind

        return router_kind(self.roles.router[index].kind or DEFAULT_ROUTER_KIND)

    @staticmethod
    def bootstrap_port(inst: RoleInstance) -> int:
        return inst.bootstrap_port or DEFAULT_BOOTSTRAP_PORT

    def service_name(self, role: str, index: int) -> str:
        inst = getattr(self.roles, role)[index]
        return inst.service or f"pdctl-{self.name}-{role}-{index}"

    def label(self, role: str, index: int) -> str:
        inst = getattr(self.roles, role)[index]
        return f"{role}[{index}]@{inst.host}:{inst.port}"

    def address_from(self, target_host: str, from_host: str) -> str:
        """The address at which `from_host` reaches `target_host` (127.0.0.1 when they are the same host)."""
        if target_host == from_host:
            return "127.0.0.1"
        host = self.hosts[target_host]
        return host.internal_address or host.address


def _is_loopback(addr: str) -> bool:
    return addr == "localhost" or addr == "::1" or addr.startswith("127.")


def parse_inventory(data: Any, source: str) -> Inventory:
    """Validate a mapping as an inventory. Raises InventoryError naming `source` and the bad field."""
    if data is None:
        raise InventoryError(
            f"{source}: the inventory is empty", hint="start from examples/seed-production.yaml or docs/inventory.md"
        )
    if not isinstance(data, dict):
        raise InventoryError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    if "hosts" in data:  # a host that names no transport is this machine (the tagged union needs the tag)
        data = {**data, "hosts": with_default_transport(data["hosts"])}
    try:
        inv = msgspec.convert(data, Inventory, strict=False)  # lax as YAML is: "8" for 8, 1 for 1.0
    except msgspec.ValidationError as err:
        lines = validation_problems(err, data, Inventory)
        raise InventoryError(
            "\n  ".join([f"{source}: invalid inventory", *lines]), hint=host_hint(data.get("hosts"))
        ) from None
    setattr(inv, "source", source)  # an instance attribute over the ClassVar default (dict=True), never a field
    return inv


def load_inventory(path: str | os.PathLike | None) -> Inventory:
    """Load and validate the inventory at `path`; None means the embedded default."""
    if path is None:
        return embedded_default()
    return parse_inventory(load_yaml(path, InventoryError, "inventory"), str(Path(path)))


def embedded_default() -> Inventory:
    """All three roles of the bundled engine on this machine, ports as in the seed, pidfile services."""
    return parse_inventory(
        {
            "name": "local",
            "engine": "bundled",
            "hosts": {"local": {"transport": "local", "service_manager": "pidfile"}},
            "roles": {
                "prefill": [
                    {"host": "local", "port": DEFAULT_PORTS["prefill"], "bootstrap_port": DEFAULT_BOOTSTRAP_PORT}
                ],
                "decode": [{"host": "local", "port": DEFAULT_PORTS["decode"]}],
                # The router's default 60 s health interval keeps a restarted worker out for minutes.
                "router": [
                    {"host": "local", "port": DEFAULT_PORTS["router"], "args": {"--health-check-interval-secs": 2}}
                ],
            },
        },
        "<embedded default>",
    )
