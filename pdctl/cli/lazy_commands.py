"""A group's commands, imported and built when first named rather than all at start-up.

typer builds every command of an app before parsing anything, inspecting each parameter's annotation (~1 ms a
command), and the app imports every command module first. `pdctl storm --help` needs one command; `pdctl --help`
needs only the first paragraph of each command's help (`peek`)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import MutableMapping
from typing import Any, Iterator


class CommandSummary:
    """What a group's help lists for a command not yet built (the attributes help_format reads). A plain class:
    a dataclass costs a millisecond at import, on every run."""

    def __init__(
        self, name: str, help: str | None, short_help: str | None = None, hidden: bool = False, deprecated: bool = False
    ):
        self.name, self.help, self.short_help, self.hidden, self.deprecated = name, help, short_help, hidden, deprecated


def resolve(ref: str) -> Any:
    """ "pdctl.cli.deploy:deploy" -> the object."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def build(name: str, source: Any):
    """The click command for a command function (as `app.command(name, cls=PdctlCommand)` registers it) or a
    typer sub-app (named in its own `typer.Typer(name=...)`)."""
    import typer

    from pdctl.cli.common import PdctlCommand

    if isinstance(source, typer.Typer):
        return typer.main.get_command(source)
    one = typer.Typer(add_completion=False, rich_markup_mode=None)
    one.command(name, cls=PdctlCommand)(source)
    return typer.main.get_command(one)


class LazyCommands(MutableMapping):
    """name -> click command, for TyperGroup.commands. Names come from `refs` ("module:function" or
    "module:typer_app"), in order; a command is imported and built on first lookup. Listing the names or testing
    one (typer's "Did you mean") builds nothing."""

    def __init__(self, refs: dict[str, str]):
        self._refs = dict(refs)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str):
        if name not in self._built:
            self._built[name] = build(name, resolve(self._refs[name]))  # KeyError: no such command
        return self._built[name]

    def __setitem__(self, name: str, command) -> None:
        self._refs.setdefault(name, "")
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._refs[name]
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._refs  # Mapping's own would build the command to find out

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    def peek(self, name: str):
        """The command if built, else what its group's help shows of it, its module imported but nothing built: a
        command function's docstring, a sub-app's `typer.Typer(help=...)` (a sub-app without one is built: its
        help comes from its callback). What `typer.Typer(...)` was not given reads as typer's placeholder for
        "not given": only a value of the field's own type counts."""
        if name in self._built:
            return self._built[name]
        import typer

        source = resolve(self._refs[name])
        if not isinstance(source, typer.Typer):
            return CommandSummary(name, inspect.getdoc(source))
        info = source.info
        if not isinstance(info.help, str):
            return self[name]
        return CommandSummary(
            name,
            info.help,
            info.short_help if isinstance(info.short_help, str) else None,
            info.hidden is True,
            info.deprecated is True,
        )
