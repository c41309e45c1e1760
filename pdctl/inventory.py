"""The declared deployment: pydantic models, the YAML loader and the embedded default.

An inventory names hosts, the three roles (one or more instances each) and what final-health expects. Errors name
the file, the dotted path to the field and what was expected (InventoryError, exit 2).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pdctl.errors import InventoryError
from pdctl.yamlfile import load_yaml, plain_problem

ROLES = ("prefill", "decode", "router")
RoleName = Literal["prefill", "decode", "router"]
ArgValue = Union[bool, int, float, str, list[Union[int, float, str]]]

# Ports of the seed deployment (and of the embedded default).
DEFAULT_PORTS = {"prefill": 30000, "decode": 30002, "router": 30001}
DEFAULT_BOOTSTRAP_PORT = 8998


SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$"   # used in file paths, lock dirs and systemd unit names


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")   # a shell identifier: the name reaches `env NAME=...` launchers


def env_as_text(v: Any) -> Any:
    """An env mapping as name -> text, validated before anything acts on it: names must be shell identifiers;
    values must be scalars (str, int, float, bool) without a NUL. A list, a mapping, a date or bytes would silently
    become their Python repr, and null (`X:` with nothing after it) an empty value, so they are refused. Booleans
    are `true`/`false`, the spelling SGLang's env parsers (get_bool_env_var, environ.EnvBool) read after
    lowercasing; numbers keep Python's text (1.5, 1e-05). Raises ValueError naming the variable."""
    if not isinstance(v, dict):
        return v
    out = {}
    for k, val in v.items():
        if not isinstance(k, str) or not ENV_NAME.fullmatch(k):
            raise ValueError(f"env name {k!r} is not a shell identifier (letters, digits and _, not starting "
                             "with a digit)")
        if val is None:
            raise ValueError(f'env {k}: null is not a value; write an empty string "" if that is meant')
        if not isinstance(val, (str, int, float, bool)):
            raise ValueError(f"env {k}: the value must be a string, number or boolean, got "
                             f"{type(val).__name__} {repr(val)[:60]}; quote it to pass it as text")
        text = ("true" if val else "false") if isinstance(val, bool) else str(val)
        if "\0" in text:
            raise ValueError(f"env {k}: the value contains a NUL character")
        out[k] = text
    return out


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Host(_Strict):
    """A machine. `transport: local` runs commands here; `ssh` reaches `address` over one SSH connection."""

    transport: Literal["local", "ssh"] = "local"
    address: str = "127.0.0.1"
    user: str | None = None
    port: int = Field(22, ge=1, le=65535)
    key: str | None = None                   # private key file
    known_hosts: str | None = None           # default: ~/.ssh/known_hosts
    accept_new_host_key: bool = False        # only an explicit yes trusts an unknown key
    ssh_config: str | None = None            # default: ~/.ssh/config when it exists
    proxy_jump: str | None = None            # like ssh -J: [user@]host[:port][,next-hop...]; else ssh_config's ProxyJump
    connect_timeout: float = Field(10.0, gt=0)
    command_timeout: float = Field(60.0, gt=0)
    http: Literal["direct", "tunnel"] = "direct"   # tunnel: reach role ports via the SSH connection
    keep_connection: float = Field(0.0, ge=0, le=86400)   # ssh: idle seconds a keeper holds it between runs; 0 off
    internal_address: str | None = None      # how other roles reach this host; default 127.0.0.1 (same host)
    service_manager: Literal["systemd", "pidfile"] = "pidfile"
    # the Restart= of the units pdctl renders; docs/inventory.md says what each choice costs (systemd only)
    systemd_restart: Literal["on-failure", "always", "no"] = "on-failure"
    python: str | None = None                # interpreter for engine/sglang; default: this one (local), python3 (ssh)
    state_dir: str | None = None             # pidfiles, logs, rendered launchers; default per transport
    workdir: str | None = None               # cwd of launched processes (bundled engine: a checkout with engine/)

    @field_validator("systemd_restart", mode="before")
    @classmethod
    def _yaml_no_is_a_policy(cls, v: Any) -> Any:
        return "no" if v is False else v     # YAML reads a bare `no` as false

    @model_validator(mode="after")
    def _restart_policy_needs_systemd(self) -> "Host":
        # the default is allowed anywhere: a dumped and re-read inventory carries it on every host
        if self.systemd_restart != "on-failure" and self.service_manager != "systemd":
            raise ValueError("systemd_restart: only service_manager: systemd restarts a service on its own "
                             "(the pidfile manager never does)")
        return self


class RoleInstance(_Strict):
    """One process of a role on a host."""

    host: str = "local"
    port: int = Field(..., ge=1, le=65535)
    listen_host: str = "127.0.0.1"
    bootstrap_port: int | None = Field(None, ge=1, le=65535)   # prefill only
    service: str | None = Field(None, pattern=SAFE_NAME)   # systemd unit or pidfile name; default pdctl-<name>-<role>-<i>
    args: dict[str, ArgValue] = Field(default_factory=dict)     # extra launch flags: {"--flag": value|true}
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout: float = Field(300.0, gt=0)

    @field_validator("args")
    @classmethod
    def _flags_start_with_dashes(cls, v: dict[str, ArgValue]) -> dict[str, ArgValue]:
        for flag in v:
            if not flag.startswith("--"):
                raise ValueError(f"launch flag {flag!r} must start with '--'")
        return v

    @field_validator("args")
    @classmethod
    def _no_nul_in_args(cls, v: dict[str, ArgValue]) -> dict[str, ArgValue]:
        for flag, val in v.items():   # a NUL cannot be passed to exec: the role would fail to start mid-deploy
            if any("\0" in x for x in [flag, *(val if isinstance(val, list) else [val])] if isinstance(x, str)):
                raise ValueError(f"launch flag {flag!r}: contains a NUL character")
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_text(cls, v: Any) -> Any:
        return env_as_text(v)


class Roles(_Strict):
    prefill: list[RoleInstance] = Field(..., min_length=1)
    decode: list[RoleInstance] = Field(..., min_length=1)
    router: list[RoleInstance] = Field(..., min_length=1)


class Probe(_Strict):
    """The end-to-end chat completion of final-health."""

    model: str | None = None                 # default: the served model name
    prompt: str = "hi"
    max_tokens: int = Field(8, ge=1)
    timeout: float = Field(30.0, gt=0)


class Expect(_Strict):
    """Flags and env final-health expects on a role beyond those the role declares."""

    flags: dict[str, ArgValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_text(cls, v: Any) -> Any:
        return env_as_text(v)


class FinalHealth(_Strict):
    health_timeout: float = Field(4.0, gt=0)   # the seed's curl -m4
    metrics_timeout: float = Field(5.0, gt=0)
    probe: Probe = Field(default_factory=Probe)
    expect: dict[RoleName, Expect] = Field(default_factory=dict)


class SilencedRule(_Strict):
    """A lint rule the operator switched off, with the reason `pdctl lint` shows."""

    rule: str
    reason: str = Field(..., min_length=1)
    role: str | None = None                  # a role (decode) or instance (decode[0]); default every role

    @field_validator("rule")
    @classmethod
    def _known_and_silenceable(cls, v: str) -> str:
        from pdctl.checks.lint_rules import RULES

        if v not in RULES:
            raise ValueError(f"unknown lint rule {v!r} (docs/lint.md lists them)")
        if RULES[v].blocks:
            raise ValueError(f"lint rule {v!r} cannot be silenced: the command line would not start "
                             "(fix it, or pass --skip-lint to deploy/restart once)")
        return v


class LintSettings(_Strict):
    """`pdctl lint` settings: env names only a site's own build reads (name -> why) and silenced rules."""

    site_env: dict[str, str] = Field(default_factory=dict)
    silence: list[SilencedRule] = Field(default_factory=list)

    @field_validator("site_env")
    @classmethod
    def _names_with_reasons(cls, v: dict[str, str]) -> dict[str, str]:
        for name, reason in v.items():
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"site_env: {name!r} is not an env name")
            if not str(reason).strip():
                raise ValueError(f"site_env.{name}: give the reason (which build reads it)")
        return v


class WatchSettings(_Strict):
    """`pdctl watch` cadences (seconds between rounds of each) and where its exporter listens (docs/watch.md)."""

    health_every: float = Field(5.0, gt=0, le=86400)      # /health, router /readiness, the transfer counters
    inflight_interval: float = Field(1.0, gt=0, le=3600)  # one read of every worker's PD gauges, continuously
    inflight_window: float = Field(20.0, gt=0, le=86400)  # the sliding window the inflight verdict judges
    e2e_every: float = Field(30.0, gt=0, le=86400)        # a chat completion through each router
    pairs_every: float = Field(30.0, gt=0, le=86400)      # a canary for every prefill x decode pair
    flags_every: float = Field(60.0, gt=0, le=86400)      # live flags/env and the restart lineage
    listen: str = "127.0.0.1:9464"                        # the exporter's HOST:PORT

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str) -> str:
        parse_listen(v)
        return v

    @model_validator(mode="after")
    def _window_holds_samples(self) -> "WatchSettings":
        if self.inflight_interval > self.inflight_window:
            raise ValueError(f"inflight_interval {self.inflight_interval:g} must be at most inflight_window "
                             f"{self.inflight_window:g}")
        return self


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9464' or '[::1]:9464' -> (host, port). Raises ValueError saying what HOST:PORT wants."""
    host, sep, port = str(text).rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"listen {text!r}: expected HOST:PORT with a port 1-65535 (e.g. 127.0.0.1:9464)")
    return host, int(port)


class Inventory(_Strict):
    name: str = Field("local", pattern=SAFE_NAME)
    engine: Literal["bundled", "sglang"] = "bundled"
    model_path: str | None = None            # sglang: required; bundled: optional engine checkpoint
    served_model_name: str = "pdctl-tiny"
    transfer_backend: str = "nixl"
    hosts: dict[str, Host] = Field(default_factory=lambda: {"local": Host()})
    roles: Roles
    final_health: FinalHealth = Field(default_factory=FinalHealth)
    lint: LintSettings = Field(default_factory=LintSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    source: str = Field("<embedded default>", exclude=True)

    @model_validator(mode="after")
    def _cross_checks(self) -> "Inventory":
        for role in ROLES:
            for i, inst in enumerate(getattr(self.roles, role)):
                if inst.host not in self.hosts:
                    known = ", ".join(sorted(self.hosts)) or "none"
                    raise ValueError(f"roles.{role}.{i}.host: unknown host {inst.host!r} (hosts: {known})")
                if role != "prefill" and inst.bootstrap_port is not None:
                    raise ValueError(f"roles.{role}.{i}.bootstrap_port: only prefill has a bootstrap port")
        self._check_reachable()
        if self.engine == "sglang" and not self.model_path:
            raise ValueError("model_path: required when engine is 'sglang'")
        seen: dict[tuple[str, int], str] = {}
        for role, i, inst in self.instances():
            ports = [inst.port] + ([self.bootstrap_port(inst)] if role == "prefill" else [])
            for p in ports:
                key = (inst.host, p)
                if key in seen:
                    raise ValueError(f"roles.{role}.{i}.port: port {p} on host {inst.host!r} is also used by {seen[key]}")
                seen[key] = f"{role}[{i}]"
        return self

    def _check_reachable(self) -> None:
        """A role bound to loopback can only be dialled from its own host: refuse an inventory where another
        host's role (or the operator, with http: direct over SSH) would have to reach it."""
        for role, i, inst in self.instances():
            if not _is_loopback(inst.listen_host):
                continue
            dialers = [] if role == "router" else self.instances("router")   # nobody but the operator dials a router
            if role == "prefill":
                dialers += self.instances("decode")
            for r, j, other in dialers:
                if other.host != inst.host:
                    raise ValueError(
                        f"roles.{role}.{i}.listen_host: {inst.listen_host} is reachable only on host {inst.host!r}, "
                        f"but {r}[{j}] on host {other.host!r} must reach it; listen on 0.0.0.0 or the host's address")
            host = self.hosts[inst.host]
            if host.transport == "ssh" and host.http == "direct":
                raise ValueError(
                    f"roles.{role}.{i}.listen_host: {inst.listen_host} cannot be probed directly on {host.address}; "
                    f"set hosts.{inst.host}.http: tunnel, or listen on the host's address")

    # -- derived views ---------------------------------------------------------------------------------------
    def instances(self, role: str | None = None) -> list[tuple[str, int, RoleInstance]]:
        """(role, index, instance) for every instance, in the safe start order prefill -> decode -> router."""
        out = []
        for r in ROLES if role is None else (role,):
            out.extend((r, i, inst) for i, inst in enumerate(getattr(self.roles, r)))
        return out

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


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = [f"{source}: invalid inventory"]
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg, got_txt = plain_problem(e)
        lines.append(f"  {path}: {msg}{got_txt}")
    return "\n".join(lines)


def parse_inventory(data: Any, source: str) -> Inventory:
    """Validate a mapping as an inventory. Raises InventoryError naming `source` and each bad field."""
    if data is None:
        raise InventoryError(f"{source}: the inventory is empty",
                             hint="start from examples/seed-production.yaml or docs/inventory.md")
    if not isinstance(data, dict):
        raise InventoryError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        inv = Inventory.model_validate(data)
    except ValidationError as err:
        raise InventoryError(_format_validation_error(source, err)) from None
    inv.source = source
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
                "prefill": [{"host": "local", "port": DEFAULT_PORTS["prefill"], "bootstrap_port": DEFAULT_BOOTSTRAP_PORT}],
                "decode": [{"host": "local", "port": DEFAULT_PORTS["decode"]}],
                # The router's default 60 s health interval keeps a restarted worker out for minutes.
                "router": [{"host": "local", "port": DEFAULT_PORTS["router"],
                            "args": {"--health-check-interval-secs": 2}}],
            },
        },
        "<embedded default>",
    )
