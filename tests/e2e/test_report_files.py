"""`--report FILE.svg|FILE.html` from real pdctl processes, opened in headless Chromium: each report is stamped at
its top (when it was written, UTC and local with its offset; the deployment; the operator as the audit log names
them; pdctl's version; the command line, secrets masked), holds none of the progress lines the command printed on
stderr while it ran, references nothing on a network (no web font: Chromium fetches nothing), wraps long lines in
the HTML and folds them in the SVG (as wide as the console that recorded it, nothing cut). No deployment needed:
`render` is offline, and final-health runs against an inventory whose ports nobody listens on."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import pdctl
from tests.e2e.helpers import REPO, local_inventory, pdctl as run_pdctl, write_inventory
from tests.fixtures.chromium import render
from tests.fixtures.net import free_port

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "seed-production.yaml"
OPERATOR = "alice-oncall"
#: a zone with a half-hour offset and no tz database needed (POSIX TZ: XST is UTC+05:30)
ZONE = {"TZ": "XST-05:30", "COLUMNS": "80", "PDCTL_OPERATOR": OPERATOR}
STAMP = re.compile(r"report +written (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC \((\d\d:\d\d:\d\d) local, UTC\+05:30\)")
PROGRESS = ("-> final-health", "failed after", "ok final-health", "waiting for")
#: the one http(s) a document may hold of its own: the SVG's namespace, a name that nothing fetches
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def screen_rows(path: Path) -> list[str]:
    """A report's text, one entry per row (SVG: its <text> elements grouped by their y)."""
    doc = path.read_text()
    if path.suffix == ".svg":
        rows: dict[float, list[str]] = {}
        # the screen's text (classes -r1, -r2, ...), not the window's title; rich writes each row's newline as text
        for y, t in re.findall(r'<text class="[^"]*-r\d+"[^>]*?y="([\d.]+)"[^>]*>([^<]*)</text>', doc):
            rows.setdefault(float(y), []).append(html.unescape(t).replace("\xa0", " ").replace("\n", ""))
        return ["".join(parts) for _y, parts in sorted(rows.items())]
    body = doc.split("<pre>", 1)[1].split("</pre>", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", "", body)).splitlines()


def assert_stamped(rows: list[str], *, deployment: str, command: str) -> None:
    head = rows[: next(k for k, r in enumerate(rows) if r.startswith("─")) + 1]  # the stamp, down to its rule
    text = "\n".join(head)
    m = STAMP.search(text)
    assert m, text
    utc, local = m.group(1), m.group(2)  # the local time is the UTC time plus 5:30
    h, mi = int(utc[11:13]) * 60 + int(utc[14:16]) + 330, int(local[:2]) * 60 + int(local[3:5])
    assert h % (24 * 60) == mi, (utc, local)
    labels = [k for k, r in enumerate(head) if re.match(r"(report|deployment|operator|command) ", r)]
    assert [head[k].split()[0] for k in labels] == ["report", "deployment", "operator", "command"], text
    rule = len(head) - 1

    def value(k: int) -> str:  # a label's value, its rows joined (a path longer than a row is folded)
        end = labels[k + 1] if k + 1 < len(labels) else rule
        return "".join(r[11:].strip() for r in head[labels[k] : end]).replace(" ", "")

    assert value(1) == deployment.replace(" ", ""), text
    assert value(2).startswith(f"{OPERATOR};pdctl{pdctl.__version__};thecommandstarted"), text
    assert command.replace(" ", "") in value(3), text


def assert_nothing_fetched_of_its_own(path: Path, screen: str) -> None:
    """No web font, no stylesheet or script or image from anywhere; in its markup no http(s) but the SVG's xmlns;
    in its text every URL is one the command printed (the user's own text, e.g. a router's --prefill URL)."""
    doc = path.read_text()
    assert "@font-face" not in doc and "@import" not in doc and "cdnjs" not in doc
    assert not re.search(r"url\((?!#)", doc)  # only the SVG's references to its own clip paths
    markup = re.sub(r">[^<]*<", "><", doc)  # the tags alone: texts and the stylesheet left out
    assert re.findall(r"https?://[^\s\"'<>]+", markup) in ([SVG_NAMESPACE], [])
    assert not re.search(r"\b(?:src|href)\s*=", markup)
    rows = screen_rows(path)
    shown = "".join(rows) if path.suffix == ".svg" else "\n".join(rows)  # the SVG folds a URL across rows
    url = r"https?://[\w.:/-]+"
    assert set(re.findall(url, shown)) <= set(re.findall(url, screen)), shown


@pytest.fixture
def inventory(tmp_path) -> Path:
    ports = {role: free_port() for role in ("prefill", "decode", "router", "bootstrap", "prometheus")}
    data = local_inventory("report-e2e", ports, decode_env={"HF_TOKEN": "hf_declaredsecret42"})
    data["hosts"]["local"]["state_dir"] = str(tmp_path / "host-state")
    return write_inventory(tmp_path / "inv.yaml", data)


@pytest.mark.parametrize("suffix", [".html", ".svg"])
def test_render_report_is_stamped_self_contained_and_loses_nothing(tmp_path, suffix):
    out = tmp_path / f"render{suffix}"
    r = run_pdctl(["render", "-i", str(EXAMPLE), "--report", str(out)], state=tmp_path / "state", env=ZONE)
    assert r.code == 0, r.stderr
    rows = screen_rows(out)
    assert_stamped(rows, deployment=f"dsv4 ({EXAMPLE})", command=f"pdctl render -i {EXAMPLE} --report {out}")
    assert_nothing_fetched_of_its_own(out, r.stdout)
    # the verdict follows the stamp, and every line the screen showed is whole in the report
    assert any(x.startswith("rendered offline: no host was contacted") for x in rows[4:9])
    long_lines = [x for x in r.stdout.splitlines() if len(x) > 80]
    assert long_lines  # the command lines: printed whole on the screen, one line each
    doc = "".join(rows) if suffix == ".svg" else "\n".join(rows)
    for line in long_lines:
        assert line.strip() in doc, line
    if suffix == ".svg":
        assert all(len(x.rstrip()) <= 80 for x in rows)  # folded at the console's width, not cut
        assert 'viewBox="0 0 994 ' in out.read_text()  # still as wide as the 80 columns that recorded it
    else:
        assert "white-space: pre-wrap" in out.read_text() and "overflow-wrap: anywhere" in out.read_text()
        assert any(len(x) > 80 for x in rows)  # left to the browser to wrap: a copied command line stays one line


@pytest.mark.parametrize("suffix", [".html", ".svg"])
def test_a_failing_final_health_report_has_its_verdict_and_no_progress_lines(tmp_path, inventory, suffix):
    out = tmp_path / f"fh{suffix}"
    r = run_pdctl(
        ["verify", "final-health", "-i", str(inventory), "--report", str(out)],
        state=tmp_path / "state",
        env=ZONE,
        timeout=120,
    )
    assert r.code == 1, r.stderr
    # the progress's step lines were on stderr while it ran (not a terminal: kept lines) ...
    assert "-> final-health" in r.stderr and "failed after" in r.stderr
    rows = screen_rows(out)
    text = "\n".join(rows)
    # ... and are not in the report, which holds the outcome: the verdict first after the stamp, the failed checks
    assert not [p for p in PROGRESS if p in text], text
    assert_stamped(rows, deployment=f"report-e2e ({inventory})", command=f"-i {inventory} --report {out}")
    rule = next(k for k, x in enumerate(rows) if x.startswith("─"))
    assert rows[rule + 1].startswith("final-health: FAIL") and "connection refused" in text  # first after the stamp
    assert_nothing_fetched_of_its_own(out, r.stdout + r.stderr)


def test_the_command_line_in_the_stamp_is_masked(tmp_path, inventory):
    """A secret typed on the command line (a playbook's --secret-var, a secret-named --var, a value the inventory
    declares secret) is masked in the stamp; this run ends in a usage error, whose report is written too."""
    out = tmp_path / "run.html"
    argv = [
        "run",
        str(REPO / "playbooks" / "final-health.yaml"),
        "-i",
        str(inventory),
        "--dry-run",
        "--secret-var",
        "TOKEN=typed-secret-value-7",
        "--var",
        "HF_TOKEN=hf_typedsecret99",
        "--var",
        "note=hf_declaredsecret42",
        "--report",
        str(out),
    ]
    r = run_pdctl(argv, state=tmp_path / "state", env=ZONE)
    assert r.code == 2, r.stderr
    doc = out.read_text()
    for secret in ("typed-secret-value-7", "hf_typedsecret99", "hf_declaredsecret42"):
        assert secret not in doc
    rows = screen_rows(out)
    assert_stamped(rows, deployment=f"report-e2e ({inventory})", command="--dry-run --secret-var *** --var")
    assert "error: " in "\n".join(rows)


@pytest.mark.parametrize("suffix", [".html", ".svg"])
def test_chromium_opens_the_report_offline_with_its_stamp(tmp_path, suffix):
    out = tmp_path / f"render{suffix}"
    r = run_pdctl(["render", "-i", str(EXAMPLE), "--report", str(out)], state=tmp_path / "state", env=ZONE)
    assert r.code == 0, r.stderr
    page = render(out)
    assert page.fetched == []
    dom = html.unescape(page.dom).replace("\xa0", " ")
    assert OPERATOR in dom and "UTC+05:30" in dom and f"pdctl {pdctl.__version__}" in dom
    assert "rendered offline: no host was contacted" in dom
