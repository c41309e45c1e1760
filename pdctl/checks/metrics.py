"""Prometheus text exposition: a pure parser and a small query API over the parsed samples.

`parse_metrics(text)` reads the text format 0.0.4 (what SGLang's prometheus_client serves) and the OpenMetrics
variations that matter (`# EOF`, exemplars, `_created`): HELP/TYPE lines, label values with `\\`, `\"` and `\n`
escapes, `+Inf`/`-Inf`/`NaN`, optional timestamps, histograms and summaries (`_bucket`, `_sum`, `_count`).
Pure: no I/O. Raises MetricsParseError (naming the line) on a line it cannot read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from pdctl.errors import PdctlError

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Sample-name suffixes that belong to a family declared under the bare name.
_SUFFIXES = ("_bucket", "_sum", "_count", "_created", "_total", "_info", "_gcount", "_gsum")


class MetricsParseError(PdctlError, ValueError):
    """The exposition text could not be parsed; the message names the line number and the line."""


class AmbiguousSelection(PdctlError, ValueError):
    """`MetricSet.select` matched more than one sample; add labels to pick exactly one."""


@dataclass(frozen=True)
class Sample:
    name: str                      # the sample's own name, e.g. "sglang:kv_transfer_latency_ms_bucket"
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None

    def matches(self, label_match: dict[str, object]) -> bool:
        return all(self.labels.get(k) == _label_text(v) for k, v in label_match.items())

    def series(self) -> str:
        """The Prometheus notation of this series, e.g. `name{a="1",b="2"}` (labels sorted)."""
        if not self.labels:
            return self.name
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}"


@dataclass
class Family:
    name: str
    type: str = "untyped"          # counter, gauge, histogram, summary, untyped, info, ...
    help: str = ""
    samples: list[Sample] = field(default_factory=list)

    @property
    def label_names(self) -> tuple[str, ...]:
        names: set[str] = set()
        for s in self.samples:
            names.update(s.labels)
        return tuple(sorted(names))


@dataclass(frozen=True)
class FamilyInfo:
    name: str
    type: str
    help: str
    label_names: tuple[str, ...]
    sample_count: int


class MetricSet:
    """Parsed families and samples. Lookups by sample name; label values compared as text."""

    def __init__(self, families: dict[str, Family]):
        self._families = families
        self._by_sample: dict[str, list[Sample]] = {}
        for fam in families.values():
            for s in fam.samples:
                self._by_sample.setdefault(s.name, []).append(s)

    def __len__(self) -> int:
        return sum(len(f.samples) for f in self._families.values())

    def __iter__(self) -> Iterator[Sample]:
        for fam in self._families.values():
            yield from fam.samples

    def families(self) -> dict[str, FamilyInfo]:
        """name -> FamilyInfo(type, help, label names, number of samples), in exposition order."""
        return {n: FamilyInfo(n, f.type, f.help, f.label_names, len(f.samples)) for n, f in self._families.items()}

    def family(self, name: str) -> Family | None:
        """The family declared (or implied) under `name`, or the family a sample of that name belongs to."""
        fam = self._families.get(name)
        if fam is not None:
            return fam
        samples = self._by_sample.get(name)
        if samples:
            for f in self._families.values():
                if samples[0] in f.samples:
                    return f
        return None

    def has(self, name: str) -> bool:
        """True when `name` is declared (HELP/TYPE) or has samples: distinguishes 'absent' from 'no series yet'."""
        return name in self._families or name in self._by_sample

    def samples(self, name: str, **label_match: object) -> list[Sample]:
        """Samples named exactly `name` whose labels include every `label_match` (values compared as text)."""
        return [s for s in self._by_sample.get(name, ()) if s.matches(label_match)]

    def value(self, name: str, **label_match: object) -> float | None:
        """Sum of the matching samples' values, or None when no sample matches."""
        found = self.samples(name, **label_match)
        if not found:
            return None
        return math.fsum(s.value for s in found)

    def select(self, name: str, **label_match: object) -> float | None:
        """The value of the ONE matching sample (the seed's `{.*tp_rank="0"}` grep), None if none matches.

        Raises AmbiguousSelection when several samples match.
        """
        found = self.samples(name, **label_match)
        if not found:
            return None
        if len(found) > 1:
            raise AmbiguousSelection(
                f"{name} with {label_match or 'no labels'} matches {len(found)} series: "
                + ", ".join(s.series() for s in found[:4]) + (" ..." if len(found) > 4 else "")
            )
        return found[0].value

    def grep(self, pattern: str) -> list[Sample]:
        """Samples whose exposition line `series value` matches the regex (like `grep -E '^...'` on the text)."""
        rx = re.compile(pattern)
        return [s for s in self if rx.search(f"{s.series()} {_fmt(s.value)}")]


def parse_metrics(text: str) -> MetricSet:
    """Parse Prometheus text exposition into a MetricSet. Pure; raises MetricsParseError naming the bad line."""
    families: dict[str, Family] = {}

    def fam_for_sample(sample_name: str) -> Family:
        fam = families.get(sample_name)
        if fam is not None:
            return fam
        for suf in _SUFFIXES:
            if sample_name.endswith(suf):
                base = families.get(sample_name[: -len(suf)])
                if base is not None and base.type in ("histogram", "summary", "counter", "gaugehistogram", "info",
                                                        "untyped", "unknown"):
                    return base
        fam = families[sample_name] = Family(sample_name)
        return fam

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].strip().split(None, 2)
            if len(parts) >= 2 and parts[0] in ("HELP", "TYPE"):
                name = parts[1]
                if not _NAME_RE.fullmatch(name):
                    raise MetricsParseError(f"line {lineno}: bad metric name in {parts[0]}: {raw!r}")
                fam = families.setdefault(name, Family(name))
                rest = parts[2] if len(parts) > 2 else ""
                if parts[0] == "HELP":
                    fam.help = _unescape_help(rest)
                else:
                    fam.type = rest.strip().lower() or "untyped"
            continue  # other comments, `# EOF`, `# UNIT`
        try:
            sample = _parse_sample(line)
        except ValueError as e:
            raise MetricsParseError(f"line {lineno}: {e}: {raw[:200]!r}") from None
        fam_for_sample(sample.name).samples.append(sample)
    return MetricSet(families)


def _parse_sample(line: str) -> Sample:
    m = _NAME_RE.match(line)
    if not m:
        raise ValueError("no metric name")
    name = m.group(0)
    pos = m.end()
    labels: dict[str, str] = {}
    brace = pos
    while brace < len(line) and line[brace] in " \t":
        brace += 1
    if brace < len(line) and line[brace] == "{":
        pos = brace
        pos = _parse_labels(line, pos + 1, labels)
    rest = line[pos:]
    # OpenMetrics exemplar: `value [ts] # {labels} value [ts]`
    if " # " in rest:
        rest = rest.split(" # ", 1)[0]
    fields = rest.split()
    if not fields or len(fields) > 2:
        raise ValueError("expected a value and an optional timestamp")
    value = _parse_float(fields[0])
    ts = None
    if len(fields) == 2:
        try:
            ts = int(float(fields[1]))
        except ValueError:
            raise ValueError(f"bad timestamp {fields[1]!r}") from None
    return Sample(name, labels, value, ts)


def _parse_labels(line: str, pos: int, out: dict[str, str]) -> int:
    """Parse `a="x",b="y"}` from pos; return the index after `}`."""
    n = len(line)
    while True:
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos < n and line[pos] == "}":
            return pos + 1
        m = _LABEL_NAME_RE.match(line, pos)
        if not m:
            raise ValueError(f"bad label name at column {pos + 1}")
        lname = m.group(0)
        pos = m.end()
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n or line[pos] != "=":
            raise ValueError(f"expected '=' after label {lname}")
        pos += 1
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n or line[pos] != '"':
            raise ValueError(f"expected '\"' to open the value of label {lname}")
        pos += 1
        buf = []
        while True:
            if pos >= n:
                raise ValueError(f"unterminated value of label {lname}")
            c = line[pos]
            if c == "\\":
                if pos + 1 >= n:
                    raise ValueError(f"dangling escape in label {lname}")
                e = line[pos + 1]
                buf.append({"n": "\n", "\\": "\\", '"': '"'}.get(e, "\\" + e))
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                buf.append(c)
                pos += 1
        out[lname] = "".join(buf)
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos < n and line[pos] == ",":
            pos += 1
        elif pos < n and line[pos] == "}":
            return pos + 1
        else:
            raise ValueError(f"expected ',' or '}}' after label {lname}")


def _parse_float(text: str) -> float:
    t = text.strip()
    low = t.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    try:
        return float(t)
    except ValueError:
        raise ValueError(f"bad sample value {t!r}") from None


def _unescape_help(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in ("\\", "n"):
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def sum_values(samples: Iterable[Sample]) -> float:
    return math.fsum(s.value for s in samples)
