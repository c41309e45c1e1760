"""What the scheduler tells a request's sink, in order: Tokens (any number), then exactly one Done or Failed.

They cross the scheduler pipe as they are (pickled), so they are plain frozen dataclasses with slots; the HTTP
process reads them without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

# one sampled token's logprob, as SGLang returns it: (logprob, [(token_id, logprob), ... the top k])
LogprobEntry = tuple[float, list[tuple[int, float]]]


@dataclass(frozen=True, slots=True)
class Tokens:
    """New output tokens with their logprob entries (None where not asked for). `reason` is set on the batch that
    ends the request, so a stream can send the last token together with its finish reason; its Done follows."""

    ids: list[int]
    logprobs: list[LogprobEntry | None]
    reason: dict | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """Finished (length, stop, or abort), SGLang's finish_reason."""

    reason: dict


@dataclass(frozen=True, slots=True)
class Failed:
    """Failed with an HTTP status (a failed transfer, a timeout, an internal error)."""

    code: int
    message: str


Event = Union[Tokens, Done, Failed]
Sink = Callable[[Event], None]


def ends(ev: Event) -> bool:
    """The request's last event: nothing follows it."""
    return isinstance(ev, (Done, Failed))
