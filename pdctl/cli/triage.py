"""`pdctl triage` (placeholder until ops.triage lands)."""


def triage() -> None:
    """The seeds' stall decision path (not yet wired)."""
