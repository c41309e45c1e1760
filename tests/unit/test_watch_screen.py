"""The watch's live screen at 80 columns by 24 rows (pdctl/render/watch_screen.py): rows wrap at spaces and
continue indented, the next command for what fails comes right after the verdict (the heal's action for a broken
pair, else the failing checks' typed next_step), it says where its exporter listens and its timeline is written
(read from a real exporter bound by run_watch), and at the live view's height the verdict, the next command and
where stay while the least important rows go, said to be."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import httpx

from pdctl.checks.result import NEXT_DEPLOY, NEXT_STATUS, NEXT_TRIAGE, CheckResult, Status
from pdctl.checks.watch_state import PAIR_BROKEN_AFTER, WatchState
from pdctl.render.watch_screen import LIVE_ROWS_LEFT, Where, next_step, screen_text

H_P = "gpu-pf-01.us-east-2.compute.internal"  # long host names: a label is 52-53 characters
H_D = "gpu-dc-02.us-east-2.compute.internal"
T0 = 1_700_000_000.0
FLAG = "--disaggregation-bootstrap-port"
CLOCK = time.strftime("%H:%M:%S", time.localtime(T0 + 20))  # the screen's clock, at its last rounds
WHERE = Where("http://127.0.0.1:9464/metrics", "/var/log/pdctl/watch-prod-west-2x2.timeline.jsonl")


def label(role: str, i: int) -> str:
    return f"{role}[{i}]@{H_P if role == 'prefill' else H_D}:{30000 + 2 * i + (role == 'decode')}"


def drifted(st: WatchState, n: int = 1) -> None:
    st.apply_checks(
        "flags",
        [
            CheckResult(
                "flags",
                label("decode", 0),
                f"{FLAG}-{k}" if k else FLAG,
                Status.FAIL,
                observed="9999",
                expected="8998",
                next_step=NEXT_DEPLOY,
            )
            for k in range(n)
        ],
        T0 + 1,
    )


def broken_pair(st: WatchState, prefill: int = 0, decode: int = 0) -> None:
    for k in range(PAIR_BROKEN_AFTER):
        st.apply_pairs([(label("prefill", prefill), label("decode", decode), "fail", None)], T0 + 2 + k)


def rows(st: WatchState, **kw) -> list[str]:
    return screen_text(st, T0 + 20, width=80, **kw).plain.splitlines()


def test_a_long_row_wraps_at_spaces_and_continues_indented():
    st = WatchState("prod-west-2x2", started=T0)
    drifted(st)
    st.apply_checks(
        "health",
        [],
        T0 + 1,
        unknown={label("router", 1): f"ssh {H_D}:22: timed out after 10 s waiting for the host key exchange"},
    )
    out = rows(st, where=WHERE)
    assert all(len(r) <= 80 for r in out), [r for r in out if len(r) > 80]
    # the failing check's row: status, layer, target, check: wrapped, the rest under the text, not at column 0
    k = next(i for i, r in enumerate(out) if r.startswith("fail    flags "))
    assert out[k] == f"fail    flags {label('decode', 0)}"
    assert out[k + 1] == f"        {FLAG}"
    assert out[k + 2] == "        expected 8998; found 9999"
    # an unknown target's why, and the last rounds line: every row after a row's first is indented
    u = next(i for i, r in enumerate(out) if r.startswith("unknown "))
    assert out[u + 1].startswith("        ") and out[u + 1].strip()
    assert "timed out after 10 s waiting for the host key exchange" in " ".join(x.strip() for x in out[u : u + 3])
    last = next(i for i, r in enumerate(out) if r.startswith(CLOCK + " last rounds: "))
    assert all(r.startswith("  ") for r in out[last + 1 :])
    # nothing starts at column 0 but a row's first line (a status, a known head word)
    heads = ("watch ", "next: ", "exporter ", "fail ", "unknown ", CLOCK + " last rounds: ")
    assert all(r.startswith(heads) or r.startswith(" ") for r in out), out
    # identifiers stay whole on one row
    for ident in (label("decode", 0), label("router", 1), FLAG, WHERE.exporter, str(WHERE.timeline)):
        assert any(ident in r for r in out), ident


def test_a_word_longer_than_the_row_is_folded_not_cut():
    st = WatchState("d", started=T0)
    body = '{"error":"' + "x" * 150 + '"}'
    st.apply_checks("e2e", [CheckResult("e2e", "router[0]@h:1", "canary", Status.FAIL, observed=body)], T0 + 1)
    out = rows(st)
    assert all(len(r) <= 80 for r in out)
    assert body in "".join(r.strip() for r in out)  # every character kept, in order


def test_a_broken_pair_names_restart_pair_right_after_the_verdict():
    st = WatchState("prod-west-2x2", started=T0)
    drifted(st)  # a drift names deploy; the broken pair's restart goes first
    broken_pair(st)
    out = rows(st, where=WHERE)
    assert out[0].startswith("watch prod-west-2x2: FAIL")
    assert out[1] == "next: pdctl restart --pair  (prefill[0] -> decode[0] broken: 3 failed canaries)"
    assert any(r.startswith(f"pair {label('prefill', 0)} ->") for r in out)
    step = next_step(st)
    assert step is not None and step.command == "pdctl restart --pair"


def test_a_broken_pair_on_xpyd_names_the_rolling_restart_as_the_heal_would():
    st = WatchState("x", started=T0)
    for p in (0, 1):
        for d in (0, 1):
            st.apply_pairs([(label("prefill", p), label("decode", d), "pass", 0.1)], T0 + 1)
    broken_pair(st, 1, 0)
    step = next_step(st)
    assert step is not None and step.command == "pdctl restart --rolling"
    assert step.why == "prefill[1] -> decode[0] broken: 3 failed canaries"


def test_the_next_command_is_the_failing_checks_typed_next_step():
    st = WatchState("d", started=T0)
    assert next_step(st) is None and not any(r.startswith("next:") for r in rows(st))
    drifted(st, 3)  # three checks, one next step
    out = rows(st)
    assert out[1] == f"next: {NEXT_DEPLOY}"
    # a second cause with another next step: triage tells them apart
    st.apply_checks(
        "health",
        [CheckResult("health", label("decode", 0), "/health", Status.FAIL, observed="refused", next_step=NEXT_STATUS)],
        T0 + 2,
    )
    assert rows(st)[1] == f"next: {NEXT_TRIAGE}"
    # a warning or an unknown is not what fails: no next command for it alone
    st2 = WatchState("d", started=T0)
    st2.apply_checks("health", [], T0, unknown={label("decode", 0): "ssh: timed out"})
    assert next_step(st2) is None


def test_it_says_where_the_exporter_listens_and_the_timeline_is_written(tmp_path):
    assert Where("http://[::1]:9464/metrics", None).said() == "exporter http://[::1]:9464/metrics; timeline none"
    assert Where("http://127.0.0.1:1/metrics", "-").said().endswith("; timeline stdout")
    said = Where("", "rel.jsonl").said()
    assert said.startswith("exporter none; timeline /") and said.endswith("/rel.jsonl")
    st = WatchState("prod-west-2x2", started=T0)
    out = rows(st, where=WHERE)
    assert out[1] == f"exporter {WHERE.exporter}; timeline"  # the verdict, then where (nothing fails)
    assert out[2] == f"  {WHERE.timeline}"


def test_run_watch_hands_the_screen_the_address_it_listens_on_and_its_timeline(tmp_path, monkeypatch):
    """Through run_watch with a real exporter on a free port: the URL the screen says answers /metrics."""
    from pdctl.inventory import WatchSettings
    from pdctl.ops import watch as watch_op
    from pdctl.ops.watch_rounds import Seen
    from pdctl.render.watch_timeline import TimelineWriter

    monkeypatch.setattr(watch_op, "ROUNDS", {name: (lambda _dep: Seen()) for name in watch_op.ROUNDS})
    settings = WatchSettings(
        health_every=0.05,
        inflight_interval=0.05,
        inflight_window=0.1,
        e2e_every=0.05,
        pairs_every=0.05,
        flags_every=0.05,
    )
    inv = SimpleNamespace(name="d", watch=settings, source="<embedded default>", instances=lambda: [])
    dep = SimpleNamespace(inv=inv)
    timeline = tmp_path / "timeline.jsonl"
    writer = TimelineWriter(str(timeline))
    seen: dict[str, object] = {}

    class Screen:
        def __init__(self, w):
            self.w = w

        def __enter__(self):
            where = Where(self.w.exporter_url, self.w.timeline)
            seen["where"] = where
            seen["scrape"] = httpx.get(where.exporter, timeout=5)
            seen["text"] = screen_text(self.w.state, self.w.wall(), where=where, width=80).plain
            return self

        def __exit__(self, *exc):
            return None

    try:
        result = watch_op.run_watch(
            dep, on_lines=[writer], once=True, for_s=20, serve=("127.0.0.1", 0), screen=Screen, stop=threading.Event()
        )
    finally:
        writer.close()
    assert result.exit_code() == 0
    where = seen["where"]
    assert isinstance(where, Where) and where.timeline == str(timeline)
    assert where.exporter.startswith("http://127.0.0.1:") and where.exporter.endswith("/metrics")
    assert seen["scrape"].status_code == 200 and "pdctl_" in seen["scrape"].text
    assert where.exporter in str(seen["text"]) and str(timeline) in str(seen["text"])


def test_it_fits_80x24_keeping_verdict_next_command_and_where():
    """Many failing checks at the live view's height (24 rows less the prompt's and the stop line's): the
    verdict, the next command and where stay first; the rows that do not fit go, from the least important, said."""
    st = WatchState("prod-west-2x2", started=T0)
    drifted(st, 12)
    broken_pair(st)
    st.apply_checks(
        "inflight",
        [CheckResult("inflight", "prefill+decode", "inflight", Status.WARN, observed="busy", detail="3 rooms")],
        T0 + 3,
    )
    for cadence in ("health", "inflight", "e2e", "pairs", "flags"):
        st.round_done(cadence, T0 + 19, 0.5)
    height = 24 - LIVE_ROWS_LEFT
    out = rows(st, where=WHERE, rows=height)
    assert len(out) <= height and all(len(r) <= 80 for r in out)
    assert out[0].startswith("watch prod-west-2x2: FAIL  12 failing")
    assert out[1].startswith("next: pdctl restart --pair")
    assert any(r.startswith(f"exporter {WHERE.exporter}") for r in out[2:4])
    assert any(r.startswith(f"pair {label('prefill', 0)}") for r in out)  # the most important rows stay
    assert f"        {FLAG}" in out  # the first failing check stays
    note = " ".join(r.strip() for r in out if "not shown to fit the screen" in r or r.startswith("  "))
    assert "not shown to fit the screen:" in note and "pdctl verify final-health -v" in note
    assert any(r.startswith(f"{CLOCK} last rounds: health 1s ago") for r in out[-2:])
    # without a height (the final view printed once, a pipe) nothing is left out
    whole = rows(st, where=WHERE)
    assert len(whole) > height and not any("not shown to fit" in r for r in whole)
    assert sum(1 for r in whole if r.startswith("fail    flags ")) == 12


def test_the_live_view_renders_at_the_terminals_size(monkeypatch):
    """LiveScreen's frame: the console's width and height (less the prompt's and the stop line's rows), and where
    the watch it shows serves and writes."""
    import threading as th

    from pdctl.render.watch_screen import LiveScreen

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    st = WatchState("prod-west-2x2", started=T0)
    drifted(st, 30)
    watch = SimpleNamespace(
        state=st, lock=th.RLock(), exporter_url="http://127.0.0.1:9464/metrics", timeline=None, wall=lambda: T0 + 20
    )
    frame = LiveScreen(watch)._render().plain.splitlines()
    assert len(frame) == 24 - LIVE_ROWS_LEFT and all(len(r) <= 80 for r in frame)
    assert frame[0].startswith("watch prod-west-2x2: FAIL  30 failing")
    assert frame[1] == f"next: {NEXT_DEPLOY}"
    assert frame[2] == "exporter http://127.0.0.1:9464/metrics; timeline none"
