"""KVPoll: SGLang's transfer states. Failed is 0, so a max() of states lets Transferring beat Failed."""

from enum import IntEnum


class KVPoll(IntEnum):
    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


TERMINAL = (KVPoll.Failed, KVPoll.Success)


def reduce_min(polls):
    """Across ranks a Failed anywhere wins (SGLang reduces poll results with MIN)."""
    return KVPoll(min(int(p) for p in polls))
