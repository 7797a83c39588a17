"""The screen's measurements for NCCL's example tuner plugin: ``tuner_perf.csv`` and ``nccl_tuner.conf``.

Every ok screen run of a set that names one algorithm and one protocol (NCCL_ALGO, NCCL_PROTO;
:func:`tuner.screen.plugin_export.plugin_names_from_env`) gives one CSV row per measured size, in the
format of NCCL's ``plugins/tuner/example/scripts/optimize_config.py``; the fastest measurement
at each size becomes a line of the plugin's config (:func:`tuner.screen.plugin_export.choices_by_size`),
so the decode size gets its best algorithm and protocol without forcing it on prefill's large
allreduces. Runs with wrong values are never exported. What the plugin does that a reader may
not expect (one channel where no line matches) comes back in ``notes``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuner.record import Status
from tuner.screen.plugin_export import (
    TunerMeasurement,
    choices_by_size,
    plugin_compatibility,
    plugin_names_from_env,
    write_tuner_config,
    write_tuner_perf_csv,
)
from tuner.screen.store import ScreenRecord

__all__ = ["Export", "write_exports"]

CSV_NAME = "tuner_perf.csv"
CONF_NAME = "nccl_tuner.conf"
_HEADER = ("nccl-tune: per-size allreduce choices from the screen (nccl-tests times). Load with NCCL's example "
           "tuner plugin (plugins/tuner/example in the NCCL sources, 2.27.5+): NCCL_TUNER_PLUGIN=<path to "
           "libnccl-tuner-example.so> NCCL_TUNER_CONFIG_FILE=<this file>, and no NCCL_ALGO/NCCL_PROTO set.")


@dataclass
class Export:
    """What :func:`write_exports` wrote: ``csv`` and ``conf`` paths (None when nothing could be
    written), the config's ``lines``, ``notes`` (skipped measurements, sizes run on one
    channel), and ``compatibility`` (which tuner API versions the NCCL loads; empty when the
    version is unknown)."""

    csv: Path | None = None
    conf: Path | None = None
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compatibility: str = ""


def measurements(records: Sequence[ScreenRecord]) -> list[TunerMeasurement]:
    """One :class:`~tuner.screen.plugin_export.TunerMeasurement` per ok run and measured size (the
    untuned set's with no algorithm: NCCL's own choice)."""
    out = []
    for r in records:
        if r.status is not Status.OK or not r.ran:
            continue
        names = plugin_names_from_env(r.env)
        if r.env and names is None:
            continue  # a list, an exclusion, or only one of algorithm/protocol: not a plugin line
        algo, proto, channels = names if names else (None, None, -1)
        for row in r.rows:
            if row.get("time_us_oop") is None:
                continue
            out.append(TunerMeasurement("allreduce", int(row["size"]), algo, proto, channels,
                                        float(row["time_us_oop"]), float(row.get("busbw_GBps") or 0.0),
                                        ranks=r.nranks or -1))
    return out


_OWN = re.compile(r"^(\d+)-(\d+) B: NCCL's own choice was fastest at (\d+) B; no line written$")


def _merged(notes: list[str]) -> list[str]:
    """Consecutive "NCCL's own choice was fastest" notes of adjacent ranges as one note."""
    out: list[str] = []
    run: list[re.Match[str]] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0].string)
        elif run:
            out.append(f"{run[0].group(1)}-{run[-1].group(2)} B: NCCL's own choice was fastest at every screened "
                       f"size from {run[0].group(3)} to {run[-1].group(3)} B; no line written")
        run.clear()

    for note in notes:
        m = _OWN.match(note)
        if m and (not run or int(run[-1].group(2)) + 1 == int(m.group(1))):
            run.append(m)
            continue
        flush()
        if m:
            run.append(m)
        else:
            out.append(note)
    flush()
    return out


def write_exports(records: Sequence[ScreenRecord], out_dir: Path, nccl_version: str = "") -> Export:
    """Write ``out_dir/tuner_perf.csv`` and ``out_dir/nccl_tuner.conf`` from the screen's runs.

    ``nccl_version`` (the baseline's, e.g. ``2.27.5``) decides the compatibility sentence. The
    config is written only when some set beat NCCL's own choice at some size. Raises OSError
    when a file cannot be written.
    """
    found = measurements(records)
    result = Export(compatibility=plugin_compatibility(nccl_version) if nccl_version else "")
    explicit = [m for m in found if m.algorithm is not None]
    if not explicit:
        result.notes.append("no screened set named exactly one NCCL_ALGO and one NCCL_PROTO: nothing the "
                            "example plugin could be told")
        return result
    # One topology per config: the rank count most runs had.
    ranks = max({m.ranks for m in found}, key=lambda n: sum(1 for m in found if m.ranks == n))
    found = [m for m in found if m.ranks == ranks]
    result.csv = out_dir / CSV_NAME
    result.notes += write_tuner_perf_csv([m for m in found if m.algorithm is not None], result.csv)
    if any(m.algorithm is None for m in found):
        result.notes.append("the untuned runs (NCCL's own choice) have no algorithm/protocol to write: "
                            "left out of the CSV, but they compete in the config below")
    choices, notes = choices_by_size(found)
    result.notes += _merged(notes)
    if choices:
        result.conf = out_dir / CONF_NAME
        result.notes += write_tuner_config(choices, result.conf, header=_HEADER)
        result.lines = [c.line() for c in choices]
    else:
        result.notes.append("NCCL's own choice was fastest at every screened size: no tuner config written")
    return result
