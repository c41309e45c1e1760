"""The console class every printer writes through: rich's, with pdctl's answer to a reader that goes away."""

from __future__ import annotations

from rich.console import Console


class PdctlConsole(Console):
    """rich's console, except when the reader of its output goes away (`pdctl ... | head`): the rest is dropped and
    the command goes on to its verdict (pdctl/broken_pipe.py), where rich would exit 1, pdctl's "a check failed"."""

    def on_broken_pipe(self) -> None:
        from pdctl.broken_pipe import drop_rest_of_output

        self.quiet = True
        drop_rest_of_output()
