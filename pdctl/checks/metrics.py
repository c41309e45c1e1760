"""Prometheus text exposition: prometheus_client's parser, and a small query API over the parsed samples.

`parse_metrics(text)` reads the text format 0.0.4 (what SGLang's prometheus_client serves) with
`prometheus_client.parser.text_string_to_metric_families`, then groups the samples as pdctl always has:
- a family is named as HELP/TYPE declares it, a counter with its `_total`, and its samples keep their names from
  the text (the library renames both: it strips `_total` from a counter family, or appends it to its samples);
- a sample no declaration covers (the library makes it an untyped family of its own) joins the declared family it
  is a suffix of (`lat_created` -> histogram `lat`), else a family under its own name;
- the type `untyped` is kept as such (the library says `unknown`), values are floats, timestamps in ms.
The library is laxer than the format: of extra fields after the value it takes the last as the timestamp (an
OpenMetrics exemplar's timestamp too; SGLang's text has no exemplars). Pure: no I/O. Raises MetricsParseError
(naming the line number and the line) on a line the library cannot read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from prometheus_client.parser import text_string_to_metric_families

from pdctl.errors import PdctlError

# HELP/TYPE lines: which names are declared, and which as counters; the library renames them (module docstring).
_DECL_RE = re.compile(r'^[ \t]*#[ \t]+(HELP|TYPE)[ \t]+("[^"]*"|\S+)(?:[ \t]+(\S+))?', re.M)
# Sample-name suffixes that belong to a family declared under the bare name.
_SUFFIXES = ("_bucket", "_sum", "_count", "_created", "_total", "_info", "_gcount", "_gsum")
_SUFFIXED_TYPES = ("histogram", "summary", "counter", "gaugehistogram", "info", "untyped")


class MetricsParseError(PdctlError, ValueError):
    """The exposition text could not be parsed; the message names the line number and the line."""


class AmbiguousSelection(PdctlError, ValueError):
    """`MetricSet.select` matched more than one sample; add labels to pick exactly one."""


@dataclass(frozen=True)
class Sample:
    name: str  # the sample's own name, e.g. "sglang:kv_transfer_latency_ms_bucket"
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
    type: str = "untyped"  # counter, gauge, histogram, summary, untyped, info, ...
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
                + ", ".join(s.series() for s in found[:4])
                + (" ..." if len(found) > 4 else "")
            )
        return found[0].value


def only_families(text: str, names: Iterable[str]) -> str:
    """The lines of `text` that belong to the families `names` (their HELP/TYPE lines and samples, suffixed ones
    such as `_bucket` or `_created` included), so that a check that reads two counters does not have the library
    parse the 600 lines of a worker's /metrics. Lines it cannot place (quoted names) are kept."""
    wanted = set(names)

    def belongs(name: str) -> bool:
        return (
            name in wanted
            or name + "_total" in wanted
            or any(name == w + suf for w in wanted for suf in _SUFFIXES)
            or (name.endswith("_created") and name[: -len("_created")] + "_total" in wanted)
        )

    def keep(line: str) -> bool:
        stripped = line.lstrip()
        if not stripped or stripped.startswith("{"):
            return bool(stripped)
        if stripped.startswith("#"):
            m = _DECL_RE.match(stripped)
            return m is not None and belongs(m.group(2).strip('"'))
        return belongs(re.split(r"[{ \t]", stripped, maxsplit=1)[0])

    return "\n".join(line for line in text.splitlines() if keep(line)) + "\n"


def parse_metrics(text: str, families: Iterable[str] | None = None) -> MetricSet:
    """Parse Prometheus text exposition into a MetricSet (only `families`, when given). Pure; raises
    MetricsParseError naming the bad line."""
    if families is not None:
        text = only_families(text, families)

    try:
        parsed = list(text_string_to_metric_families(text))
    except (ValueError, IndexError) as e:  # IndexError: the library trips over some garbage lines
        raise _parse_error(text, e) from None
    declared, counters = set(), set()
    for kind, name, typ in _DECL_RE.findall(text):
        declared.add(name.strip('"'))
        if kind == "TYPE" and typ == "counter":
            counters.add(name.strip('"'))
    by_name: dict[str, Family] = {}
    for metric in parsed:
        name, samples = metric.name, [_sample(s) for s in metric.samples]
        if metric.type == "counter":
            if name + "_total" in counters:
                name += "_total"  # the library strips the declared `_total` from the family name
            else:  # ... or appends `_total` to samples of a counter declared without it
                samples = [Sample(name, s.labels, s.value, s.timestamp_ms) for s in samples]
        if name in declared:
            fam = by_name.setdefault(name, Family(name))
            if metric.type != "unknown":
                fam.type = metric.type
            fam.help = metric.documentation or fam.help
            fam.samples.extend(samples)
        else:  # the library made an undeclared sample a family of its own
            for s in samples:
                _family_for(by_name, s.name).samples.append(s)
    return MetricSet(by_name)


def _family_for(families: dict[str, Family], sample_name: str) -> Family:
    """The family an undeclared sample belongs to: `x_created` to histogram `x` and the like, else its own."""
    fam = families.get(sample_name)
    if fam is not None:
        return fam
    for suf in _SUFFIXES:
        if sample_name.endswith(suf):
            base = families.get(sample_name[: -len(suf)])
            if base is not None and base.type in _SUFFIXED_TYPES:
                return base
    fam = families[sample_name] = Family(sample_name)
    return fam


def _sample(s) -> Sample:
    """pdctl's Sample from the library's: float value, timestamp in ms (the library gives seconds)."""
    ts = None if s.timestamp is None else round(float(s.timestamp) * 1000)
    return Sample(s.name, dict(s.labels), float(s.value), ts)


def _parse_error(text: str, err: Exception) -> MetricsParseError:
    """Name the line the library could not read: the first line that fails on its own (its errors rarely say)."""
    for lineno, line in enumerate(text.split("\n"), 1):  # the library reads lines split on \n only
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line))
        except (ValueError, IndexError) as e:
            reason = str(e) or type(e).__name__
            return MetricsParseError(f"line {lineno}: {reason}: {line[:200]!r}")
    return MetricsParseError(f"cannot parse the metrics text: {err or type(err).__name__}")


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
