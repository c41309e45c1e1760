"""paramiko, imported without `invoke`.

paramiko.config imports the `invoke` task runner at import time, only to run ssh_config's `Match exec` commands;
invoke brings its vendored YAML, asyncio and unittest.mock along: ~70-80 ms of a cold SSH run's ~80-160 ms
paramiko import (`-X importtime`, this machine). So the first import holds invoke off (paramiko treats it as not
installed), and ssh_config_for hands it over only for a file that has a `Match exec`.
"""

from __future__ import annotations

import re
import sys
import threading
from types import ModuleType

_lock = threading.Lock()
_MATCH_EXEC = re.compile(r"(?im)^\s*match\b.*\bexec\b")


def import_paramiko() -> ModuleType:
    """The paramiko package (imported on first call, invoke held off unless something imported it already)."""
    with _lock:
        if "paramiko" not in sys.modules and "invoke" not in sys.modules:
            sys.modules["invoke"] = None  # `import invoke` raises ImportError: paramiko.config sets invoke = None
            try:
                import paramiko  # noqa: F401
            finally:
                del sys.modules["invoke"]  # anyone's later `import invoke` is the real one
    import paramiko

    return paramiko


def allow_match_exec(ssh_config_text: str) -> None:
    """Give paramiko invoke when this ssh_config has a `Match exec` line (it runs that command as ssh does)."""
    import paramiko.config

    if paramiko.config.invoke is None and _MATCH_EXEC.search(ssh_config_text):
        try:
            import invoke
        except ImportError:
            return  # not installed: paramiko says so when it reaches the line, as it always did
        paramiko.config.invoke = invoke
