"""paramiko, imported without `invoke` when nothing needs it.

paramiko.config imports the `invoke` task runner at import time, only to run ssh_config's `Match exec` commands;
invoke brings its vendored YAML, asyncio and unittest.mock along: ~70-80 ms of a cold SSH run's ~80-160 ms
paramiko import (`-X importtime`, this machine). So paramiko is imported with invoke held off (a `None` in
sys.modules, Python's documented way to make an import fail; paramiko treats invoke as not installed) unless the
first ssh_config read has a `Match exec` line. Nothing of paramiko's own is touched afterwards: an ssh_config with
`Match exec` read after paramiko was loaded without invoke is refused by name (`match_exec_problem`).
"""

from __future__ import annotations

import re
import sys
import threading
from types import ModuleType

_lock = threading.Lock()
_MATCH_EXEC = re.compile(r"(?im)^\s*match\b.*\bexec\b")
_held_off = False  # whether paramiko was imported with invoke held off (then it cannot run `Match exec`)


def import_paramiko(*, with_invoke: bool = False) -> ModuleType:
    """The paramiko package, imported on the first call: with invoke when `with_invoke` (or something imported
    invoke already), else with invoke held off. A later call returns the same package, whatever it asks."""
    global _held_off
    with _lock:
        if "paramiko" not in sys.modules:
            hold = not with_invoke and "invoke" not in sys.modules
            if hold:
                sys.modules["invoke"] = None  # type: ignore[assignment]  # `import invoke` raises ImportError
            try:
                import paramiko  # noqa: F401
            finally:
                if hold:
                    del sys.modules["invoke"]  # anyone's later `import invoke` is the real one
            _held_off = hold
    import paramiko

    return paramiko


def needs_match_exec(ssh_config_text: str) -> bool:
    """Whether an ssh_config has a `Match exec` line (paramiko runs its command with invoke, as ssh does)."""
    return bool(_MATCH_EXEC.search(ssh_config_text))


def match_exec_problem(ssh_config_text: str) -> str | None:
    """Why paramiko, as imported, cannot read this ssh_config (it has `Match exec` and paramiko was loaded without
    invoke), or None. Call after import_paramiko(with_invoke=needs_match_exec(text))."""
    if _held_off and needs_match_exec(ssh_config_text):
        return "it has a `Match exec` line and paramiko was loaded before it was read, without invoke (which runs it)"
    return None
