"""Before pdctl writes or removes anything under a host's state_dir (the deployment lock, pidfiles, specs, logs),
the path is checked on that host, through its transport (issue 28, S4, second re-pass: `hosts.local.state_dir:
$T/sticky/pdir/st` with `pdir -> $T/victim`, nobody's link in a 1777 directory, made `pdctl down` create root's
`victim/st/locks/` and `down --purge` delete files in victim).

A small POSIX sh walk runs on the host (`ls -lnd` and `readlink` on each component, as the kernel would look the
path up, `id -u` for the euid there) and pdctl.checks.host_path judges what it printed; the same rule as the files
pdctl writes here (pdctl.checks.path_trust). Missing directories are made one at a time with plain `mkdir` (which
follows no link and fails on any name someone made first), then the path is walked and judged again. Once per
transport (a host, for one run): the verdict is kept."""

from __future__ import annotations

import threading
import weakref

from pdctl.checks.host_path import judge_walk, parse_walk
from pdctl.errors import RefusedError
from pdctl.shell import quote
from pdctl.transport.base import Transport, no_answer

TIMEOUT_S = 30.0

# Prints: EUID n; per component E<TAB>ls-mode<TAB>uid<TAB>gid<TAB>holder<TAB>path; then END<TAB>dir, or
# MISSING<TAB>path<TAB>rest, NOTDIR/LOOP/GONE<TAB>path. Links are followed as the kernel would (their target from
# / or from the link's directory, `..` from the directory reached); nothing is written.
_WALK = r"""set -f
rest=$1; cur=/; links=0
printf 'EUID\t%s\n' "$(id -u)"
ent() {
  set -- "$1" "$2" $(ls -lnd -- "$2" 2>/dev/null)
  [ $# -ge 6 ] || { printf 'GONE\t%s\n' "$2"; exit 0; }
  printf 'E\t%s\t%s\t%s\t%s\t%s\n' "$3" "$5" "$6" "$1" "$2"
}
ent "" /
while :; do
  case $rest in /*) rest=${rest#/}; continue;; esac
  [ -n "$rest" ] || break
  case $rest in */*) part=${rest%%/*}; rest=${rest#*/};; *) part=$rest; rest=;; esac
  case $part in .) continue;; ..) cur=$(dirname -- "$cur"); continue;; esac
  case $cur in /) next=/$part;; *) next=$cur/$part;; esac
  if [ ! -e "$next" ] && [ ! -L "$next" ]; then printf 'MISSING\t%s\t%s\n' "$next" "$rest"; exit 0; fi
  ent "$cur" "$next"
  if [ -L "$next" ]; then
    links=$((links + 1))
    [ $links -le 40 ] || { printf 'LOOP\t%s\n' "$next"; exit 0; }
    t=$(readlink -- "$next") || { printf 'GONE\t%s\n' "$next"; exit 0; }
    case $t in /*) cur=/;; esac
    rest=$t/$rest
  elif [ -d "$next" ]; then cur=$next
  else printf 'NOTDIR\t%s\n' "$next"; exit 0
  fi
done
printf 'END\t%s\n' "$cur"
"""


class StateDirRefused(RefusedError):
    """A host's state_dir path could be turned by another user: pdctl writes nothing under it (exit 4)."""


_checked: weakref.WeakKeyDictionary[Transport, set[str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def ensure_state_dir(transport: Transport, state_dir: str) -> None:
    """Check (once per transport) that pdctl may write under `state_dir` on the transport's host, making what is
    missing of it. Raises StateDirRefused naming `hosts.<host>.state_dir`, the component and why;
    UnreachableError when the host did not answer."""
    with _lock:
        if state_dir in _checked.get(transport, ()):
            return
    what = f"hosts.{transport.name}.state_dir {state_dir}"
    if not state_dir.startswith("/"):
        raise StateDirRefused(f"{what}: not an absolute path", hint=_HINT)
    walk = _walk(transport, state_dir, what)
    if walk.missing is not None and judge_walk(walk) is None:
        failed = _make(transport, walk.missing, what)
        walk = _walk(transport, state_dir, what)
        if walk.missing is not None:
            raise StateDirRefused(f"{what}: {walk.missing[0]} could not be made ({failed or 'gone again'})", hint=_HINT)
    why = judge_walk(walk)
    if why is not None:
        raise StateDirRefused(f"{what}: {why}; pdctl writes and removes nothing under it", hint=_HINT)
    with _lock:
        _checked.setdefault(transport, set()).add(state_dir)


_HINT = (
    "give a state_dir whose every directory belongs to the user pdctl acts as there (or root) and that no other "
    "user may write into; see docs/inventory.md (state_dir)"
)


def _walk(transport: Transport, state_dir: str, what: str):
    res = transport.run(f"sh -c {quote(_WALK)} sh {quote(state_dir)}", timeout=TIMEOUT_S)
    if res.timed_out:
        raise no_answer(transport.name, TIMEOUT_S, f"checking {what}")
    try:
        return parse_walk(res.stdout)
    except ValueError:
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise StateDirRefused(
            f"{what}: could not be checked on the host (exit {res.exit_code}"
            + (f": {detail[-1]}" if detail else "")
            + ")",
            hint=_HINT,
        ) from None


def _make(transport: Transport, missing: tuple[str, str], what: str) -> str:
    """Make the first missing directory and the rest of the path below it, each with a plain mkdir; what mkdir
    said when one failed (someone made the name first, no permission), "" when all were made."""
    first, rest = missing
    dirs, d = [first], first
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise StateDirRefused(f"{what}: {first} is missing and the path goes on with '..' below it", hint=_HINT)
        d = f"{d}/{part}"
        dirs.append(d)
    res = transport.run(" && ".join(f"mkdir -- {quote(x)}" for x in dirs), timeout=TIMEOUT_S)
    if res.timed_out:
        raise no_answer(transport.name, TIMEOUT_S, f"making {first}")
    # a name someone made first is judged by the next walk
    return "" if res.ok else (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
