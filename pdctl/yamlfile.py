"""Reading an operator's YAML file (inventory, playbook): only a regular file of at most 1 MiB of UTF-8
text is read, a duplicated key is refused, and every error names the file (and the line and column when it can);
plus how a value found in such a file is shown in a validation problem (`shown_input`, secrets never shown)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from pdctl.errors import UsageError
from pdctl.safe_read import MAX_INPUT_BYTES, read_input_text

__all__ = ["MAX_INPUT_BYTES", "load_yaml", "read_input_text", "shown_input"]

#: a reference bomb ("billion laughs": aliases of aliases) is a few hundred bytes that expand to 10^9 nodes; an
#: inventory or playbook uses an alias a handful of times (`<<: *defaults`)
MAX_ALIAS_USES = 10_000
MAX_ALIAS_NODES = 100_000  # nodes that aliases add once expanded, beyond the document's own


def load_yaml(path: str | os.PathLike, error: type[UsageError], what: str) -> Any:
    """Parse the YAML file at `path` (read with read_input_text). A key given twice in one mapping is refused (YAML
    would silently keep the last). Raises `error` (exit 2) naming the file, and the line and column when it can."""
    import yaml

    p = Path(path)
    text = read_input_text(p, error, what)
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 -- a SafeLoader subclass
    except yaml.reader.ReaderError as e:
        raise error(
            f"{p}: not a text file: character #x{e.character:04x} at character offset {e.position} ({e.reason})"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(e, "problem", None) or e
        prefix = "" if str(problem).startswith("duplicate key") else " not valid YAML:"
        raise error(f"{p}:{where}{prefix} {problem}") from None
    except RecursionError:
        raise error(f"{p}: nested too deeply for {what} files") from None
    except _AliasBomb as e:
        raise error(f"{p}: {e}; write the values out instead of nesting aliases") from None


class _AliasBomb(Exception):
    """The document's aliases expand to more than the caps allow (message: by how much)."""


def _check_expansion(root, alias_uses: int) -> None:
    """Raise _AliasBomb when the composed document `root` (aliases are shared nodes) would expand to more than
    MAX_ALIAS_NODES nodes beyond its own, or refers to itself. Walks each distinct node once."""
    if alias_uses > MAX_ALIAS_USES:
        raise _AliasBomb(f"too many YAML aliases: more than {MAX_ALIAS_USES} alias uses")
    sizes: dict[int, int] = {}  # id(node) -> expanded size; -1 while the node is being walked
    distinct = 0

    def size(node) -> int:
        nonlocal distinct
        known = sizes.get(id(node))
        if known == -1:
            raise _AliasBomb("a YAML alias refers to a node that contains it")
        if known is not None:
            return known
        sizes[id(node)] = -1
        distinct += 1
        # a scalar's value is its text, a sequence's its nodes, a mapping's its (key, value) node pairs
        items = [] if isinstance(node.value, str) else node.value
        total = 1 + sum(size(c) for item in items for c in (item if isinstance(item, tuple) else (item,)))
        if total - distinct > MAX_ALIAS_NODES:
            raise _AliasBomb(
                f"too many YAML aliases: they expand to more than {MAX_ALIAS_NODES} nodes beyond the "
                "document's own (a reference bomb?)"
            )
        sizes[id(node)] = total
        return total

    if root is not None:
        size(root)


@functools.lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    """A yaml.SafeLoader whose mappings refuse a key given twice (built on first use: yaml stays out of --help)."""
    import yaml
    from yaml.constructor import ConstructorError

    class UniqueKeyLoader(yaml.SafeLoader):
        alias_uses = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                self.alias_uses += 1
            return super().compose_node(parent, index)

        def compose_document(self):
            # aliases are shared nodes here; checked before anything (construction, validation) walks them
            node = super().compose_document()
            _check_expansion(node, self.alias_uses)
            return node

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _value in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` then overriding a key is allowed
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:  # by Python equality: 1 and true would also collapse into one entry
                        first = seen.get(key)
                    except TypeError:  # unhashable: SafeConstructor raises its own error
                        continue
                    if first is not None:
                        raise ConstructorError(
                            None,
                            None,
                            f"duplicate key {key!r} (first given at line {first}); remove one",
                            key_node.start_mark,
                        )
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def shown_input(got: Any, loc: Iterable[Any], scrub: set[str], *, secret: Callable[[str], bool] | None = None) -> str:
    """ " (got VALUE)" for the value found at the field `loc` (its path), or "" for nothing or a collection.

    Never shows a secret: the value of a field whose name (any part of `loc`) satisfies `secret` (default: a
    secret-looking name, `is_secret_name`) is MASK, and the texts in `scrub` and secret-looking `NAME=value` /
    `--flag value` texts are scrubbed (`mask_text`). A masked value long enough to scrub joins `scrub`, so the
    caller can scrub the message too (a check's message may quote it)."""
    from pdctl.secrets import MASK, MIN_SCRUB_LEN, is_secret_name, mask_text

    secret = secret or is_secret_name
    if isinstance(got, (dict, list, tuple, set, frozenset)):
        return ""
    if got not in (None, "", False) and any(secret(str(p)) for p in loc):
        if isinstance(got, str) and len(got) >= MIN_SCRUB_LEN:
            scrub.add(got)
        return f" (got {MASK})"
    if isinstance(got, str):  # scrubbed before repr() quotes it: a masked `NAME=value` keeps its closing quote
        return f" (got {mask_text(got, scrub)!r})"
    return f" (got {mask_text(repr(got), scrub)})"
