"""The storm report's figures (ops/storm_figures.py): the time series rows and the audit summary are typed, and
their JSON is key for key what `storm --json` and the audit record have always had."""

from __future__ import annotations

from pdctl.ops.storm import StormReport, summary
from pdctl.ops.storm_figures import SeriesRow
from pdctl.serialize import to_data

from tests.unit.test_storm_report import pt, storm_rep


def test_series_rows_are_typed_and_phased():
    rep = storm_rep()
    rows = rep.series_rows()
    assert [r.phase for r in rows] == ["before", "load", "load", "watch", "watch", "watch"]
    assert rows[1] == SeriesRow(0.0, "load", None, 8.0, 5.0, 0.0, 10.0)
    assert rows[4].since_stop == 0.28 and rows[0].t == -6.39
    # the --json `series` is the rows' fields, in this order
    keys = ["t", "phase", "since_stop", "inflight", "prefill_inflight", "transfer_failed", "generation_tokens"]
    assert list(to_data(rep)["series"][1]) == keys
    assert to_data(rep)["series"] == [to_data(r) for r in rows]


def test_an_incomplete_sample_has_no_inflight_or_transfer_failed():
    p = pt(1.0, 3)
    p.errors["decode[0]"] = "timed out"
    rep = storm_rep(points=[pt(0.0), p, pt(3.0)])
    row = rep.series_rows()[1]
    assert row.inflight is None and row.transfer_failed is None and row.prefill_inflight == 3


def test_summary_json_is_the_audit_records_shape():
    rep = storm_rep(points=[pt(0.0, 5, 3, failed=1), pt(1.0, 2, failed=4), pt(3.0)])
    rep.notes.append("a note")
    got = to_data(summary(rep))
    assert list(got) == [
        "partial",
        "verdict",
        "requests",
        "sent",
        "hits",
        "window_s",
        "spacing_s",
        "load_s",
        "samples",
        "peak_inflight",
        "transfer_failed_delta",
        "holders",
        "notes",
    ]
    assert got["verdict"] == to_data(rep.verdict) and got["hits"] == to_data(rep.hits)
    assert got["window_s"] == [1.8, 2.7] and got["load_s"] == 2.73 and got["samples"] == 3
    assert got["peak_inflight"] == 8.0 and got["transfer_failed_delta"] == -1.0 and got["notes"] == ["a note"]


def test_summary_of_an_empty_report():
    got = to_data(summary(StormReport(config={}, router="http://r")))
    assert got["verdict"] is None and got["window_s"] is None and got["load_s"] is None
    assert got["peak_inflight"] is None and got["transfer_failed_delta"] is None and got["requests"] == 0
