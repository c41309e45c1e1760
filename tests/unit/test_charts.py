"""The column chart of a series (storm, verify inflight): a y-axis labelled 0..max, one column per sample, x labels in
seconds, every chart line within the width, samples bucketed by their maximum when they do not fit (and said)."""

from __future__ import annotations

import pytest

from pdctl.render.charts import bucket, vertical_chart


def columns(lines: list[str]) -> list[str]:
    """The chart body: the text right of the y-axis, one string per row, top row first."""
    body = [x for x in lines[1:] if "│" in x]
    return [x.split("│", 1)[1] for x in body]


def test_axis_max_and_one_column_per_sample():
    lines = vertical_chart([0, 1, 12, 6, 0], [0.0, 0.5, 1.0, 1.5, 2.0], width=60, height=4, title="inflight")
    assert lines[0] == "inflight: max 12; 5 samples"
    assert lines[1].startswith("12 │")  # the top of the axis is the maximum
    assert lines[-2] == " 0 └─────"  # the bottom is 0, one axis cell per sample
    rows = columns(lines)
    assert len(rows) == 4
    top = rows[0].ljust(5)
    assert top[2] == "█" and top[0] == " " and top[1] == " "  # 12 reaches the top; 1 does not
    bottom = rows[-1].ljust(5)
    assert bottom[1] != " " and bottom[0] == " " and bottom[4] == " "  # 1 of 12 still shows; zero is empty
    assert lines[-1].split()[0] == "0"  # the x labels are the samples' seconds


def test_one_and_twelve_are_told_apart():
    """The old sparkline drew a lone 1 and a lone 12 the same; here the scale is on the axis."""
    one = vertical_chart([0, 1, 0], width=40, title="s")
    twelve = vertical_chart([0, 12, 0], width=40, title="s")
    assert "max 1;" in one[0] and "max 12;" in twelve[0]
    assert one[1].startswith("1 │") and twelve[1].startswith("12 │")


def test_missing_samples_are_marked_on_the_axis():
    lines = vertical_chart([3, None, 3], width=40, title="s")
    assert lines[-1].endswith("└─·─")


def test_all_zero_is_the_axis_alone():
    lines = vertical_chart([0, 0, 0, 0], [0, 1, 2, 3], width=40, title="inflight")
    assert lines[0] == "inflight: max 0; 4 samples"
    assert lines[1] == "0 └────" and "│" not in "".join(lines)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_many_samples_are_bucketed_within_the_width_and_a_peak_survives(width):
    values = [0.0] * 500
    values[321] = 7.0  # one stuck request among zeros
    times = [0.5 * i for i in range(500)]
    lines = vertical_chart(values, times, width=width, height=3, title="inflight per sample")
    assert all(len(x) <= width for x in lines[1:])
    assert "500 samples" in lines[0] and "a column (their max)" in lines[0]
    k = int(lines[0].split(", ")[1].split()[0])
    assert k == -(-500 // (width - 3))
    assert any("█" in row for row in columns(lines))  # the peak is drawn, not averaged away
    labels = lines[-1].split()
    assert labels[0] == "0" and labels[-1] == "s" and float(labels[-2]) > 100


def test_bucket_takes_the_maximum_and_keeps_gaps():
    assert bucket([1, 5, None, None, 2], 3) == ([5, None, 2], 2)
    assert bucket([1, 2], 10) == ([1, 2], 1)


def test_x_labels_never_overlap():
    lines = vertical_chart([1.0] * 30, [100.0 + i for i in range(30)], width=40, title="s")
    labels = lines[-1].split()
    assert labels[:3] == ["100", "106", "112"] and labels[-1] == "s"
