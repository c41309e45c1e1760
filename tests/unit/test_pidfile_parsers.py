"""Pure parsers of the pidfile manager: /proc/<pid>/stat start time and its conversion to epoch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pdctl.services.pidfile import (
    parse_btime,
    parse_proc_probe,
    parse_proc_stat,
    parse_proc_stat_starttime,
    ticks_to_epoch,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "systemctl"


def test_starttime_with_spaces_and_parens_in_comm():
    text = (FIX / "proc_stat_spaces.txt").read_text()
    assert parse_proc_stat_starttime(text) == 184023341
    st = parse_proc_stat(text)
    assert (st.pid, st.state, st.pgrp) == (48213, "S", 48213)


def test_starttime_of_this_process_matches_live_proc():
    text = Path(f"/proc/{os.getpid()}/stat").read_text()
    ticks = parse_proc_stat_starttime(text)
    btime = parse_btime(Path("/proc/stat").read_text())
    epoch = ticks_to_epoch(ticks, btime, os.sysconf("SC_CLK_TCK"))
    import time

    assert btime < epoch <= time.time() + 1


def test_ticks_to_epoch():
    assert ticks_to_epoch(250, 1_700_000_000, 100) == 1_700_000_002.5


def test_garbage_is_rejected():
    with pytest.raises(ValueError):
        parse_proc_stat("not a stat line")
    with pytest.raises(ValueError):
        parse_proc_stat("12 (x) S 1 2")
    with pytest.raises(ValueError):
        parse_btime("cpu 1 2 3\n")


def test_parse_proc_probe():
    stat = (FIX / "proc_stat_spaces.txt").read_text().strip()
    out = f"STAT {stat}\nbtime 1741680000\nCLK_TCK 100\n"
    p = parse_proc_probe(out)
    assert p.pid == 48213 and p.alive and p.start_ticks == 184023341
    assert p.started_at == 1741680000 + 1840233.41
    zombie = out.replace(") S ", ") Z ")
    assert not parse_proc_probe(zombie).alive
    assert parse_proc_probe("") is None
