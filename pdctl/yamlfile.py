"""Reading an operator's YAML file (inventory, playbook): only a regular file of at most 1 MiB of UTF-8
text is read, a duplicated key is refused, and every error names the file (and the line and column when it can);
plus one plain wording of a validation problem for every such file."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Any

from pdctl.errors import UsageError

MAX_INPUT_BYTES = 1 << 20      # an inventory or playbook is a few KiB; anything bigger is the wrong file


def read_input_text(path: str | os.PathLike, error: type[UsageError], what: str) -> str:
    """The UTF-8 text of the regular file at `path`. Refuses, without opening it for reading, a FIFO (opening one
    blocks), a device (/dev/zero never ends), a directory or a socket; refuses a file over MAX_INPUT_BYTES or not
    UTF-8. Raises `error` (exit 2) naming the file."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    _check_regular(p, st, error, what)
    try:
        # O_NONBLOCK: should the path turn into a FIFO after the stat, open still returns at once
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    try:
        _check_regular(p, os.fstat(fd), error, what)
        chunks, size = [], 0
        while size <= MAX_INPUT_BYTES:
            chunk = os.read(fd, MAX_INPUT_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise error(f"{p}: cannot read {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_INPUT_BYTES:
        raise error(_too_big(p, what))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} at byte offset {e.start}); "
                    f"save the {what} as UTF-8") from None


def _check_regular(p: Path, st: os.stat_result, error: type[UsageError], what: str) -> None:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        if st.st_size > MAX_INPUT_BYTES:
            raise error(_too_big(p, what))
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    raise error(f"{p}: is {kind}, not a regular file; give the {what} file itself")


def _too_big(p: Path, what: str) -> str:
    return f"{p}: larger than the {MAX_INPUT_BYTES // (1 << 20)} MiB limit for {what} files; is it the right file?"


def load_yaml(path: str | os.PathLike, error: type[UsageError], what: str) -> Any:
    """Parse the YAML file at `path` (read with read_input_text). A key given twice in one mapping is refused (YAML
    would silently keep the last). Raises `error` (exit 2) naming the file, and the line and column when it can."""
    import yaml

    p = Path(path)
    text = read_input_text(p, error, what)
    try:
        return yaml.load(text, Loader=_unique_key_loader())   # noqa: S506 -- a SafeLoader subclass
    except yaml.reader.ReaderError as e:
        raise error(f"{p}: not a text file: character #x{e.character:04x} at character offset {e.position} "
                    f"({e.reason})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(e, "problem", None) or e
        prefix = "" if str(problem).startswith("duplicate key") else " not valid YAML:"
        raise error(f"{p}:{where}{prefix} {problem}") from None
    except RecursionError:
        raise error(f"{p}: nested too deeply for {what} files") from None


@functools.lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    """A yaml.SafeLoader whose mappings refuse a key given twice (built on first use: yaml stays out of --help)."""
    import yaml
    from yaml.constructor import ConstructorError

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _value in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *base` then overriding a key is allowed
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:    # by Python equality: 1 and true would also collapse into one entry
                        first = seen.get(key)
                    except TypeError:               # unhashable: SafeConstructor raises its own error
                        continue
                    if first is not None:
                        raise ConstructorError(
                            None, None, f"duplicate key {key!r} (first given at line {first}); remove one",
                            key_node.start_mark)
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def plain_problem(error: dict[str, Any]) -> tuple[str, str]:
    """(what is wrong, " (got VALUE)" or "") for one entry of pydantic's `ValidationError.errors()`, in words an
    operator reads: "required field is missing", "unknown field", or pydantic's message without its prefix."""
    kind = error["type"]
    msg = {"missing": "required field is missing", "extra_forbidden": "unknown field"}.get(
        kind, error["msg"].removeprefix("Value error, "))
    got = error.get("input")
    got_txt = "" if kind == "missing" or isinstance(got, (dict, list)) else f" (got {got!r})"
    return msg, got_txt
