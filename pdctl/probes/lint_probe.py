"""Run on a role's host with the host's interpreter: ask the installed SGLang, bundled engine or router (sglang-router,
smg) to parse a rendered command line, and report the env-name registry it reads. Stdlib only; pdctl never imports it.

Request: sys.argv[1] is JSON {"items": [{"key", "kind": "sglang"|"bundled"|"sglang-router"|"smg", "argv": [flags...],
"env": {...}, "env_names": [...]}], "site_env": [names the inventory declares site-specific]}. Reply: one line
`PDCTL-LINT-REPLY {json}` on stdout, whatever the packages print meanwhile.
Per item: the version, whether the parser could be asked, its verdict (argparse's own message on a refusal),
the option strings it knows, the parsed values, and what each declared flag writes (`writes`: the option it
resolves to, the setting it writes and the value, as that parser converts it: two spellings of one setting, like
SGLang's --tp-size and --tensor-parallel-size, are told from the parser's own aliases); per kind, the env registry
(names, types, defaults, deprecated names) and, when a declared name is not in it, the SGLANG_* names the package
source reads directly.
"""

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import sys
import traceback

MARK = "PDCTL-LINT-REPLY "
_DIRECT_READ = re.compile(
    r"""(?:environ\.get|getenv|environ\[|environ\.setdefault|get_bool_env_var|"""
    r"""get_int_env_var|get_float_env_var)\(?\s*["'](SGL(?:ANG)?_[A-Z0-9_]+)["']"""
)


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)[:200]


def _options(parser):
    return sorted(s for s in parser._option_string_actions if s.startswith("--"))


# actions whose last occurrence wins (append/count actions accumulate: repeating them is no conflict)
_OVERWRITE = tuple(
    a
    for a in (argparse._StoreAction, argparse._StoreConstAction, getattr(argparse, "BooleanOptionalAction", None))
    if a
)


def _written(action, option, values):
    """The value one occurrence of `option` (with the tokens after it) writes to the action's setting."""
    if isinstance(action, getattr(argparse, "BooleanOptionalAction", ())):
        return not option.startswith("--no-")
    if action.nargs == 0 or (action.nargs == "?" and not values):
        return _jsonable(action.const)

    def convert(token):
        try:
            return _jsonable(action.type(token)) if callable(action.type) else token
        except Exception:  # the verdict says why the value is refused
            return token

    converted = [convert(v) for v in values]
    return converted[0] if action.nargs in (None, "?") and len(converted) == 1 else converted


def _writes(parser, argv):
    """For each `--flag` in argv that names one overwriting action (exactly, or by the unique prefix argparse
    accepts): the flag as written, the option it resolves to, the setting (dest) it writes, every spelling of that
    action and the value written. pdctl.checks.lint_spellings finds a setting written twice."""
    strings = parser._option_string_actions
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok == "--":
            break
        if not tok.startswith("--") or len(tok) <= 2:
            continue
        name, eq, inline = tok.partition("=")
        values = [inline] if eq else []
        while not eq and i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        hits = [name] if name in strings else [s for s in strings if s.startswith(name)]
        if len(hits) != 1 or not isinstance(strings[hits[0]], _OVERWRITE):
            continue  # unknown or ambiguous: the option analysis and the verdict say it
        action = strings[hits[0]]
        out.append(
            {
                "flag": name,
                "option": hits[0],
                "dest": action.dest,
                "spellings": [s for s in action.option_strings if s.startswith("--")],
                "value": _written(action, hits[0], values),
            }
        )
    return out


def _values(ns):
    """A parsed namespace, a dataclass or SGLang's msgspec ServerArgs as {field: JSON-able value}."""
    names = getattr(type(ns), "__struct_fields__", None) or [k for k in vars(ns) if not k.startswith("_")]
    return {k: _jsonable(getattr(ns, k, None)) for k in names}


def _error_lines(text):
    """argparse's message without the usage block before it (thousands of lines for SGLang)."""
    lines = text.strip().splitlines()
    at = max((i for i, line in enumerate(lines) if ": error: " in line), default=0)
    return "\n".join(lines[at:])[:2000]


def _parse(parse, argv, env):
    """(verdict, parsed) with the role's env set, as the server would start with it; SystemExit is argparse's
    refusal, any other exception the parser's own validation refusing the values."""
    saved = dict(os.environ)
    os.environ.update(env)
    err, out = io.StringIO(), io.StringIO()
    verdict = {"ok": False, "exit_code": None, "error": ""}
    parsed = {}
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            ns = parse(argv)
        verdict["ok"] = True
        parsed = _values(ns)
    except SystemExit as e:
        verdict["exit_code"] = e.code if isinstance(e.code, int) else 2
        verdict["error"] = _error_lines(err.getvalue())
    except Exception as e:  # the values parsed but the args' own checks refused them
        verdict["exit_code"] = 1
        verdict["error"] = f"{type(e).__name__}: {e}"[:2000]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return verdict, parsed


def _sglang_environ_alone():
    """sglang/srt/environ.py loaded on its own (stdlib only): the package import would cost torch and triton."""
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'sglang'")
    root = list(spec.submodule_search_locations)[0]
    path = os.path.join(root, "srt", "environ.py")
    mod_spec = importlib.util.spec_from_file_location("pdctl_probe_sglang_environ", path)
    mod = importlib.util.module_from_spec(mod_spec)
    with contextlib.redirect_stderr(io.StringIO()):
        mod_spec.loader.exec_module(mod)
    return mod, root


def _sglang_registry(names, site_env=()):
    mod, root = _sglang_environ_alone()
    fields = {}
    for name, field in vars(mod.Envs).items():
        if isinstance(field, mod.EnvField):
            default = field.default
            fields[name] = {
                "type": type(field).__name__,
                "default": "<computed>" if callable(default) else _jsonable(default),
                "alias": getattr(field, "deprecated_name", None),
            }
    deprecated = {
        k: {"replacement": d.replacement, "note": d.note} for k, d in getattr(mod, "_DEPRECATED_ENVS", {}).items()
    }
    direct = None
    # upper-cased: `sglang_host_ip` is judged against SGLANG_HOST_IP, which may be one of the direct reads
    wanted = {n.upper() for n in names if n.upper().startswith(("SGLANG_", "SGL_"))}
    if wanted - set(fields) - set(deprecated) - set(site_env):  # the package source is read only when needed
        direct = set()
        for d, _dirs, files in os.walk(root):
            for f in files:
                if f.endswith(".py"):
                    with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                        text = fh.read()
                    if "SGL" in text:
                        direct.update(_DIRECT_READ.findall(text))
        direct = sorted(direct - set(fields))
    return {"fields": fields, "deprecated": deprecated, "direct_reads": direct, "source": root}


def _version(dist, fallback):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return fallback()


def _ask_sglang(argv, env):
    # imported by name: these are the host's packages, never pdctl's own dependencies
    sa = importlib.import_module("sglang.srt.server_args")
    ServerArgs, prepare_server_args = sa.ServerArgs, sa.prepare_server_args
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    verdict, parsed = _parse(prepare_server_args, argv, env)
    return _version("sglang", lambda: __import__("sglang").__version__), verdict, parsed, parser


def _ask_bundled(argv, env):
    engine = importlib.import_module("engine")
    server_args = importlib.import_module("engine.server_args")

    verdict, parsed = _parse(lambda a: server_args.parse_args(a).ns, argv, env)
    parsed.pop("drills", None)
    return engine.__version__, verdict, parsed, server_args.build_parser()


def _router_asker(package, dist):
    """The parser of a router kind: sglang-router 0.3.2 and smg 1.13 lay it out alike (<package>.launch_router's
    parse_router_args, <package>.router_args.RouterArgs); the version comes from the distribution's metadata."""

    def ask(argv, env):
        parse_router_args = importlib.import_module(package + ".launch_router").parse_router_args
        RouterArgs = importlib.import_module(package + ".router_args").RouterArgs

        parser = argparse.ArgumentParser()
        RouterArgs.add_cli_args(parser, use_router_prefix=False)
        verdict, parsed = _parse(parse_router_args, argv, env)
        return (_version(dist, lambda: "unknown"), verdict, parsed, parser)

    return ask


def _bundled_registry(names, site_env=()):
    names = importlib.import_module("engine.env_registry").ENV_NAMES
    return {
        "fields": {k: dict(v) for k, v in names.items()},
        "deprecated": {},
        "direct_reads": [],
        "source": "engine.env_registry",
    }


# router kinds by their inventory name (pdctl.routers): the probe is stdlib-only and cannot import the registry
ASK = {
    "sglang": _ask_sglang,
    "bundled": _ask_bundled,
    "sglang-router": _router_asker("sglang_router", "sglang-router"),
    "smg": _router_asker("smg", "smg"),
}
REGISTRY = {"sglang": _sglang_registry, "bundled": _bundled_registry}


def _unavailable(e):
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return last[:500]


def main(request):
    reply = {"python": sys.version.split()[0], "executable": sys.executable, "items": [], "registries": {}}
    names_by_kind = {}
    for item in request["items"]:
        names_by_kind.setdefault(item["kind"], set()).update(item.get("env_names") or item.get("env", {}))
    for kind, names in names_by_kind.items():
        if kind in REGISTRY:
            try:
                reply["registries"][kind] = REGISTRY[kind](names, request.get("site_env") or ())
            except Exception as e:
                reply["registries"][kind] = {"unavailable": _unavailable(e)}
    for item in request["items"]:
        out = {"key": item["key"], "kind": item["kind"]}
        try:
            version, verdict, parsed, parser = ASK[item["kind"]](item["argv"], item.get("env", {}))
            out.update(available=True, version=version, verdict=verdict, parsed=parsed, options=_options(parser))
            out["writes"] = _writes(parser, item["argv"])
        except Exception as e:  # the parser could not be asked: not installed, or not the real package
            out.update(available=False, unavailable=_unavailable(e))
        reply["items"].append(out)
    return reply


if __name__ == "__main__":
    _reply = main(json.loads(sys.argv[1]))
    sys.stdout.write(MARK + json.dumps(_reply) + "\n")
    sys.stdout.flush()
