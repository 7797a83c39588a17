"""Read what nccl-tests' ``*_perf`` programs print: text tables of every version, ``-J`` JSON.

The screen stage runs ``all_reduce_perf`` (or another ``*_perf``) once per candidate NCCL set
and keeps its output; this module turns that output into typed rows. Everything here is a pure
function of text; nothing runs.

Formats handled, as nccl-tests prints them (NVIDIA/nccl-tests; file and function named per item):

- **Result table.** ``src/util.cu`` ``writeResultHeader`` / ``writeBenchmarkLinePreamble`` /
  ``writeBenchmarkLineBody`` (2.17+; ``src/common.cu`` before): ``size count type redop root``
  then, for out-of-place and in-place, ``time algbw busbw #wrong``. Before 2.13 ("Resync with
  NCCL 2.13", 51af557) each test printed its own header: no ``root`` column for reductions, no
  ``redop`` for broadcast, neither for all_gather/sendrecv; the last column was ``error``, the
  maximum absolute deviation (``%5.0le``), not a count. nccl-tests 1.x named the columns
  ``bytes N type op ... res`` and printed time in ms. A column prints ``N/A`` when validation is
  off (``-c 0``) or not done for that half.
- **Per-iteration statistics** (``-I 1``, 2.19.2+, ``writePerIterReport``): four more columns
  per half, ``i_min i_max i_p99 i_cv%``.
- **Timestamps** (``-S 1``, 2.17.6+, ``writeTimestamp``): ``YYYY-MM-DD HH:MM:SS`` at the row end.
- **Header lines**: ``# nccl-tests version X nccl-headers=N nccl-library=N`` (2.17.4+),
  ``# Collective test starting: NAME`` (2.16.7+), ``# nThread ... nGpus ... minBytes ...``,
  device lines ``#  Rank  0 Group  0 Pid ... on HOST device  0 [0000:01:00] NAME`` (``Group``
  since 2.13.4, ``[domain:bus:device]`` since 2.14.1; before, ``#   Rank  0 Pid ... [0x01] NAME``).
- **Footer** (``writeResultFooter``): ``# Out of bounds values : N OK|FAILED``,
  ``# Avg bus bandwidth    : X [OK|FAILED]``, ``# Collective test concluded: NAME``.
- **Failures** (``src/common.h`` ``CUDACHECK``/``NCCLCHECK``/``TESTCHECK``): ``HOST: Test NCCL
  failure FILE:LINE 'reason / last error'``, ``HOST: Test CUDA failure FILE:LINE 'reason'``,
  `` .. HOST pid N: Test failure FILE:LINE``, and ``HOST: Test timeout (Ns) FILE:LINE`` (``-T``).
- **NCCL's own log** (``NCCL_DEBUG``) goes to the same stdout: ``HOST:PID:TID [DEV] NCCL INFO``
  lines, sometimes in the middle of a table row; they are taken out and the row rejoined.
- **JSON** (``-J FILE.json``, 2.17.3+, ``jsonOutputInit`` ... ``jsonOutputFinalize``): see
  :func:`parse_json`. The text output also says ``# Writing JSON output to PATH`` (the path can
  get a ``.N`` suffix when the file exists).

Output wrapped by a launcher's per-rank prefix is unwrapped first: ``mpirun --tag-output``
(``[1,0]<stdout>:``), ``srun --label`` (``0: ``), MPICH's ``-prepend-rank`` (``[0] ``).
NCCL's WARN lines are read with or without the function NCCL 2.30.7 prints in them
(``"[%d] %s:%d (%s) NCCL WARN %s"``, src/debug.cc ``ncclDebugLogV`` at v2.30.7-1; up to
v2.30.4-1 ``"[%d] %s:%d NCCL WARN "``, ``ncclDebugLog``, the ``%s`` being ``__FILE__``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tuner.nccl import NCCL_LINE, strip_launcher
from tuner.record import Status

__all__ = [
    "Half",
    "PerfResult",
    "busbw_factor",
    "command_supports_json",
    "nccl_tests_version",
    "parse_json",
    "parse_output",
    "screen_status",
]

#: The first nccl-tests release with ``-J`` JSON output (commit 00f5281, tag v2.17.3).
JSON_MIN_VERSION = (2, 17, 3)

#: Largest deviation still "in bounds" per element type in nccl-tests < 2.13
#: (``src/common.cu`` ``DeltaMaxValue``; a row was an error when delta > this x (nranks - 1)).
_OLD_DELTA_MAX = {"half": 1e-2, "float16": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "float32": 1e-5,
                  "double": 1e-12, "float64": 1e-12}

# busbw = algbw x factor: the <Coll>GetBw functions of nccl-tests src/*.cu (doc/PERFORMANCE.md).
_BUSBW_FACTORS: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoallv": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "hypercube": lambda n: 1.0,
}


@dataclass(frozen=True)
class Half:
    """One half of a result row: out-of-place or in-place.

    ``time_us`` in microseconds (average over the timed iterations; CPU time with ``-C 1``),
    ``algbw_GBps`` = size / time, ``busbw_GBps`` = algbw x :func:`busbw_factor`, both in GB/s
    (1e9 bytes/s). ``wrong`` is the number of wrong elements (``#wrong``, nccl-tests >= 2.13) or,
    before 2.13, the largest absolute deviation (``error`` column; see
    :attr:`PerfResult.error_column`); None when the test printed ``N/A`` (no validation).
    The ``i_*`` fields come from ``-I 1`` (per-iteration, microseconds and percent); the JSON
    output adds average, median, p95, standard deviation and every iteration's time.
    """

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: float | None
    i_min_us: float | None = None
    i_max_us: float | None = None
    i_p99_us: float | None = None
    i_cv_pct: float | None = None
    i_avg_us: float | None = None
    i_p50_us: float | None = None
    i_p95_us: float | None = None
    i_stdev_us: float | None = None
    iteration_times_us: tuple[float, ...] | None = None


@dataclass(frozen=True)
class PerfRow:
    """One message size: ``size_bytes`` (the ``size`` column, bytes), ``count`` (elements),
    ``dtype`` (``float``, ``bfloat16``...), ``redop`` (``sum``...; None where the old format had
    no such column), ``root`` (-1 for rootless collectives; None where absent), the two halves
    (None when the output stops before a half), and ``timestamp`` (``-S 1``)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Half | None
    in_place: Half | None
    timestamp: str | None = None

    @property
    def complete(self) -> bool:
        """True when both halves were printed."""
        return self.out_of_place is not None and self.in_place is not None

    def best_time_us(self) -> float | None:
        """The faster printed half's time (us), or None when neither was printed."""
        times = [h.time_us for h in (self.out_of_place, self.in_place) if h is not None]
        return min(times) if times else None


@dataclass(frozen=True)
class RankDevice:
    """A ``#  Rank N ... device D [bus] NAME`` line: which GPU each rank used."""

    rank: int
    group: int | None
    pid: int | None
    host: str | None
    device: int
    bus_id: str
    name: str


@dataclass
class PerfResult:
    """Everything one nccl-tests run printed, typed.

    ``rows`` in printed order (a size repeats with ``-N`` cycles or ``-d all``); times in us,
    bandwidths in GB/s. ``problems`` says in plain words what is wrong or missing (truncated
    output, failures, wrong values, an inferred layout); an empty list plus ``complete`` means a
    clean run. Versions are strings like ``"2.18.0"``.
    """

    collective: str | None = None
    program: str | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    nccl_headers_version: str | None = None
    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    agg_iters: int | None = None
    validation: int | None = None
    graph: int | None = None
    devices: list[RankDevice] = field(default_factory=list)
    error_column: str | None = None
    rows: list[PerfRow] = field(default_factory=list)
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    avg_busbw_check: str | None = None
    complete: bool = False
    json_path: str | None = None
    args: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    nccl_warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def nranks(self) -> int | None:
        """Ranks in the run: the device lines when printed, else nThread x nGpus (one process)."""
        if self.devices:
            return len(self.devices)
        if self.n_threads and self.n_gpus:
            return self.n_threads * self.n_gpus
        return None

    @property
    def corrupted(self) -> bool:
        """True when nccl-tests counted wrong elements: a ``#wrong`` above 0 in any row, a row
        beyond nccl-tests' old tolerance, or ``Out of bounds values`` above 0."""
        if self.out_of_bounds:
            return True
        return any(self.row_corrupted(row) for row in self.rows)

    @property
    def ok(self) -> bool:
        """True for a clean, complete run: rows, the summary, no failure, no wrong values."""
        return bool(self.rows) and self.complete and not self.failures and not self.corrupted

    def row_corrupted(self, row: PerfRow) -> bool:
        """Whether ``row`` reports wrong values. ``#wrong`` above 0 is wrong. The old ``error``
        column holds a deviation, wrong when above nccl-tests' own limit
        (``DeltaMaxValue(type) x (nranks - 1)``, nccl-tests < 2.13 ``CheckData``)."""
        for half in (row.out_of_place, row.in_place):
            if half is None or half.wrong is None:
                continue
            if self.error_column == "error":
                limit = _OLD_DELTA_MAX.get(row.dtype, 0.0) * max((self.nranks or 2) - 1, 1)
                if half.wrong > limit:
                    return True
            elif half.wrong > 0:
                return True
        return False

    def rows_for(self, size_bytes: int) -> list[PerfRow]:
        """Every row of ``size_bytes`` in printed order (several with ``-N`` or ``-d all``)."""
        return [r for r in self.rows if r.size_bytes == size_bytes]

    def row(self, size_bytes: int) -> PerfRow | None:
        """The last complete row of ``size_bytes`` (else the last partial one), or None."""
        rows = self.rows_for(size_bytes)
        complete = [r for r in rows if r.complete]
        chosen = complete or rows
        return chosen[-1] if chosen else None


# -- small helpers ----------------------------------------------------------------------------

def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _code_to_version(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.x.y": major*10000+minor*100+patch since 2.9, major*1000+... before
    (nccl.h ``NCCL_VERSION``)."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _num(token: str) -> float | None:
    """A printed number (``1.5``, ``2e-07``, ``1.04858e+06``, ``nan``), or None for ``N/A``."""
    if token.upper() == "N/A":
        return None
    return float(token)


def collective_name(program: str) -> str:
    """``all_reduce_perf_mpi`` / ``AllReduce`` / ``all_reduce`` -> ``allreduce``."""
    name = program.rsplit("/", 1)[-1].lower()
    name = re.sub(r"_perf.*$", "", name)
    return name.replace("_", "").replace("-", "")


def busbw_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for ``collective`` on ``nranks`` ranks, as nccl-tests computes it.

    AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll(v), Gather, Scatter (n-1)/n;
    Broadcast, Reduce, SendRecv, HyperCube 1 (nccl-tests ``doc/PERFORMANCE.md`` and the
    ``<Coll>GetBw`` functions of ``src/*.cu``). Note that for the (n-1)/n collectives algbw is
    already computed on the total bytes (count x typesize x n). Raises ValueError for an unknown
    collective or ``nranks`` < 1.
    """
    key = collective_name(collective)
    if key not in _BUSBW_FACTORS:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(sorted(_BUSBW_FACTORS))}")
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    return _BUSBW_FACTORS[key](nranks)


def nccl_tests_version(text: str) -> str | None:
    """The version from ``# nccl-tests version X ...`` (printed by 2.17.4+), or None."""
    m = re.search(r"nccl-tests version (\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def command_supports_json(text: str) -> bool | None:
    """Whether the nccl-tests that printed ``text`` accepts ``-J`` (JSON output).

    ``text`` may be the program's ``-h`` output (USAGE lists ``-J,--output_file`` since 2.17.3),
    any output of a run (``# nccl-tests version X`` exists only in 2.17.4+, all with ``-J``), or a
    bare version such as ``"2.17.3"``. True/False when the text decides it, None when it does not
    (an older run's output carries no version: try ``-h``). ``-h`` is handled while parsing
    arguments in ``src/common.cu`` ``main``, before MPI or any GPU is touched.
    """
    if "--output_file" in text or re.search(r"\[-J,", text):
        return True
    version = nccl_tests_version(text)
    if version is None and re.fullmatch(r"\s*v?\d+\.\d+(\.\d+)?\s*", text):
        version = text.strip().lstrip("v")
    if version is not None:
        return _version_tuple(version) >= JSON_MIN_VERSION
    if "USAGE:" in text:
        return False
    return None


# -- text parsing -----------------------------------------------------------------------------

_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)")
_NTHREAD = re.compile(
    r"^#?\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: \d+\(\w+\)"
    r" warmup iters: (\d+) iters: (\d+)(?: agg iters: (\d+))? validation: (\d+)(?: graph: (\d+))?")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+(\d+)\s+)?(?:on\s+(\S+)\s+)?"
    r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_STARTING = re.compile(r"^#\s*Collective test starting: (\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded: (\S+)")
_JSON_PATH = re.compile(r"^#\s*Writing JSON output to (.+?)\s*$")
_REDUCING = re.compile(r"^#\s*Reducing maxBytes to (\d+) due to memory limitation")
_FAILURE = re.compile(r"(?:^|:\s)Test (NCCL|CUDA) failure (\S+:\d+) '(.*)'")
_OLD_FAILURE = re.compile(r"^NCCL failure (\S+:\d+) '(.*)'")
_TIMEOUT = re.compile(r"Test timeout \((\d+)s\)")
_TRACE = re.compile(r"^\s*\.\. \S+ pid \d+: Test failure (\S+)")
_ERROR_LINE = re.compile(r"^#\s*error: (.+)$")
_STDERR_ERRORS = re.compile(
    r"(error while loading shared libraries.*|Invalid number of GPUs.*|invalid option.*"
    r"|Incompatible NCCL versions.*|Segmentation fault.*|Aborted.*)")
_TIMESTAMP = re.compile(r"\s+(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+\S")

_PREFIX_NAMES = {"size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type",
                 "redop": "redop", "op": "redop", "root": "root"}
_HALF_NAMES = {"time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw",
               "#wrong": "wrong", "error": "wrong", "res": "wrong",
               "i_min": "i_min", "i_max": "i_max", "i_p99": "i_p99", "i_cv%": "i_cv"}


@dataclass
class _Layout:
    prefix: list[str]          # e.g. ["size", "count", "type", "redop", "root"]
    half: list[str]            # e.g. ["time", "algbw", "busbw", "wrong"]
    error_column: str          # "#wrong" | "error" | "res"
    time_scale: float = 1.0    # multiply printed time by this to get us (1000 for 1.x's ms)
    inferred: bool = False


def _layout_from_header(tokens: list[str]) -> _Layout | None:
    """Column layout from a ``#  size count type ... time algbw busbw #wrong ...`` header."""
    names = [t.lower() for t in tokens]
    time_idx = [i for i, t in enumerate(names) if t in ("time", "cputime")]
    if not time_idx or "algbw" not in names or not ({"size", "bytes"} & set(names)):
        return None
    prefix = [_PREFIX_NAMES.get(t, t) for t in names[:time_idx[0]]]
    end = time_idx[1] if len(time_idx) > 1 else len(names)
    half_raw = names[time_idx[0]:end]
    half = [_HALF_NAMES[t] for t in half_raw if t in _HALF_NAMES]
    error_column = next((t for t in half_raw if t in ("#wrong", "error", "res")), "#wrong")
    return _Layout(prefix=prefix, half=half, error_column=error_column,
                   time_scale=1000.0 if "bytes" in names else 1.0)


def _inferred_layout(tokens: list[str]) -> _Layout | None:
    """A layout guessed from a row's token count when no column header was seen."""
    base = ["time", "algbw", "busbw", "wrong"]
    per_iter = [*base, "i_min", "i_max", "i_p99", "i_cv"]
    n = len(tokens)
    if n == 21:
        return _Layout(["size", "count", "type", "redop", "root"], per_iter, "#wrong", inferred=True)
    if n == 13:
        return _Layout(["size", "count", "type", "redop", "root"], base, "#wrong", inferred=True)
    if n == 12:
        third = "root" if re.fullmatch(r"-?\d+", tokens[3]) else "redop"
        return _Layout(["size", "count", "type", third], base, "error", inferred=True)
    if n == 11:
        return _Layout(["size", "count", "type"], base, "error", inferred=True)
    return None


def _half(values: Sequence[str], names: Sequence[str], scale: float) -> Half:
    got = dict(zip(names, values, strict=False))

    def f(name: str) -> float | None:
        return _num(got[name]) if name in got else None

    time, alg, bus = f("time"), f("algbw"), f("busbw")
    if time is None or alg is None or bus is None:
        raise ValueError("N/A in a time or bandwidth column")
    return Half(time_us=time * scale, algbw_GBps=alg, busbw_GBps=bus, wrong=f("wrong"),
                i_min_us=f("i_min"), i_max_us=f("i_max"), i_p99_us=f("i_p99"), i_cv_pct=f("i_cv"))


def _parse_row(line: str, layout: _Layout) -> tuple[PerfRow | None, str | None]:
    """(row, problem): a row from ``line``; the problem says what was missing, if anything."""
    timestamp = None
    m = _TIMESTAMP.search(line)
    if m:
        timestamp, line = m.group(1), line[:m.start()]
    tokens = line.split()
    npre, nhalf = len(layout.prefix), len(layout.half)
    if len(tokens) < npre:
        return None, f"a result row stops before its first measurement: {line.strip()!r}"
    pre = dict(zip(layout.prefix, tokens[:npre], strict=False))
    rest = tokens[npre:]
    try:
        size, count = int(pre["size"]), int(pre["count"])
        root = int(pre["root"]) if "root" in pre else None
        halves: list[Half | None] = [None, None]
        for i in range(2):
            chunk = rest[i * nhalf:(i + 1) * nhalf]
            if len(chunk) == nhalf:
                halves[i] = _half(chunk, layout.half, layout.time_scale)
    except (ValueError, KeyError) as exc:
        return None, f"an unreadable result row ({exc}): {line.strip()!r}"
    row = PerfRow(size_bytes=size, count=count, dtype=pre.get("type", "?"), redop=pre.get("redop"),
                  root=root, out_of_place=halves[0], in_place=halves[1], timestamp=timestamp)
    problem = None
    if len(rest) > 2 * nhalf:
        problem = f"size {size}: {len(rest) - 2 * nhalf} unexpected extra columns ignored"
    elif not row.complete:
        which = "both halves" if halves[0] is None else "the in-place half"
        problem = f"size {size}: the row stops before {which} (output cut off)"
    return row, problem


def _before_log(text: str, hosts: set[str]) -> str:
    """What precedes the host name of a log line in ``text`` (which ends with that host name).

    A log line can start right after a row's first columns with no space between ("...  -1node7:"),
    so the host name is cut at a host seen on a device line when one fits, else at the last space.
    """
    for host in sorted(hosts, key=len, reverse=True):
        if text.endswith(host):
            return text[:-len(host)]
    cut = text.rfind(" ") + 1
    return text[:cut]


def _unwrap(lines: Iterable[str], result: PerfResult) -> list[str]:
    """Lines without mpirun tags and NCCL log lines; a row cut by a log line is rejoined."""
    out: list[str] = []
    pending = ""
    hosts: set[str] = set()
    for raw in lines:
        line = strip_launcher(raw.rstrip("\r\n"))  # mpirun's, srun's, MPICH's, torchrun's, docker's prefixes
        if line.startswith("#"):
            m = _DEVICE.match(line.strip())
            if m and m.group(4):
                hosts.add(m.group(4))
        m = NCCL_LINE.search(line)
        if m and m.group("pid"):  # nccl-tests' NCCL lines name host:pid:tid; the row text before is kept
            level, message = m.group("level"), m.group("msg")
            if level in ("WARN", "ABORT"):
                result.nccl_warnings.append(message.strip())
            version = _NCCL_VERSION.search(message)
            if version and result.nccl_version is None:
                result.nccl_version = version.group(1)
            before = _before_log(line[:m.start("pid") - 1], hosts)  # up to ":pid": the host is found backwards
            if before.strip():
                pending += before
            continue
        if pending:
            line, pending = pending + line, ""
        out.append(line)
    if pending:
        out.append(pending)
    return out


def parse_output(text: str, json_text: str | None = None) -> PerfResult:
    """Parse the stdout (+stderr) of an nccl-tests ``*_perf`` run into a :class:`PerfResult`.

    ``text`` may start with ``{``: it is then taken as ``-J`` JSON (:func:`parse_json`). With
    ``json_text`` (the file named by ``-J``) the rows come from the JSON when it is complete
    (full precision, per-iteration data) and everything else from the text. Never raises on bad
    input: what could not be read is said in ``problems``.
    """
    if text.lstrip().startswith("{"):
        return parse_json(text)
    result = PerfResult()
    layout: _Layout | None = None
    headers = 0
    for line in _unwrap(text.splitlines(), result):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            _parse_comment(stripped, result)
            tokens = stripped.lstrip("#").split()
            header = _layout_from_header(tokens)
            if header is not None:
                layout, headers = header, headers + 1
                result.error_column = header.error_column
            continue
        if _ROW_START.match(line):
            if layout is None:
                layout = _inferred_layout(_TIMESTAMP.sub("", line).split())
                if layout is None:
                    result.problems.append(f"a result row without a column header: {stripped!r}")
                    continue
                result.error_column = layout.error_column
                result.problems.append(
                    f"no column header before the first row; layout inferred from its "
                    f"{len(layout.prefix) + 2 * len(layout.half)} columns")
            row, problem = _parse_row(line, layout)
            if row is not None:
                result.rows.append(row)
            if problem:
                result.problems.append(problem)
            continue
        if _OOB.match(stripped) or _AVG.match(stripped) or _NTHREAD.match(stripped):
            _parse_comment(stripped, result)  # nccl-tests 1.x printed these without '#'
            continue
        _parse_other(stripped, result)
    if headers > 1 and result.nccl_tests_version is None and len(result.devices) > 1:
        result.problems.append(
            f"{headers} table headers: several independent runs in one output "
            "(nccl-tests built without MPI=1 but started by mpirun?)")
    _finish(result)
    if json_text is not None:
        _merge_json(result, json_text)
    return result


def _parse_comment(line: str, result: PerfResult) -> None:
    m = _TESTS_VERSION.match(line)
    if m:
        result.nccl_tests_version = m.group(1)
        result.nccl_headers_version = _code_to_version(int(m.group(2)))
        result.nccl_version = _code_to_version(int(m.group(3)))
        return
    m = _NTHREAD.match(line)
    if m:
        g = m.groups()
        result.n_threads, result.n_gpus, result.min_bytes, result.max_bytes = (int(x) for x in g[:4])
        result.warmup_iters, result.iters = int(g[4]), int(g[5])
        result.agg_iters = int(g[6]) if g[6] else None
        result.validation = int(g[7])
        result.graph = int(g[8]) if g[8] else None
        return
    m = _DEVICE.match(line)
    if m:
        rank, group, pid, host, dev, bus, name = m.groups()
        result.devices.append(RankDevice(rank=int(rank), group=int(group) if group else None,
                                         pid=int(pid) if pid else None, host=host, device=int(dev),
                                         bus_id=bus, name=name.strip()))
        return
    for pattern, attr in ((_STARTING, "program"), (_JSON_PATH, "json_path")):
        m = pattern.match(line)
        if m:
            setattr(result, attr, m.group(1))
            return
    m = _OOB.match(line)
    if m:
        result.out_of_bounds = int(m.group(1))
        return
    m = _AVG.match(line)
    if m:
        try:
            result.avg_busbw_GBps = float(m.group(1))
        except ValueError:
            result.problems.append(f"unreadable average bus bandwidth {m.group(1)!r}")
        result.avg_busbw_check = m.group(2)
        result.complete = True
        return
    if _CONCLUDED.match(line):
        result.complete = True
        return
    m = _REDUCING.match(line)
    if m:
        result.problems.append(f"nccl-tests reduced maxBytes to {m.group(1)} (GPU memory): larger sizes "
                               "were not measured")
        return
    m = _ERROR_LINE.match(line)
    if m:
        result.failures.append(f"NCCL last error: {m.group(1).strip()}")
        return
    m = _NCCL_VERSION.search(line)
    if m and result.nccl_version is None:
        result.nccl_version = m.group(1)


def _parse_other(line: str, result: PerfResult) -> None:
    """Non-comment, non-row lines: failures, the NCCL version line, stderr errors."""
    m = _FAILURE.search(line)
    if m:
        kind, where, why = m.groups()
        why = re.sub(r"\s*/\s*$", "", why)  # NCCLCHECK appends " / <ncclGetLastError>"
        result.failures.append(f"Test {kind} failure {where}: {why}")
        return
    m = _OLD_FAILURE.match(line)
    if m:
        result.failures.append(f"NCCL failure {m.group(1)}: {m.group(2)}")
        return
    m = _TIMEOUT.search(line)
    if m:
        result.failures.append(f"nccl-tests timed out a collective after {m.group(1)} s (-T)")
        return
    if _TRACE.match(line):
        return  # the call stack of a failure already recorded
    m = _NCCL_VERSION.search(line)
    if m:
        if result.nccl_version is None:
            result.nccl_version = m.group(1)
        return
    m = _STDERR_ERRORS.search(line)
    if m:
        result.failures.append(m.group(1).strip())


def _finish(result: PerfResult) -> None:
    if result.program:
        result.collective = collective_name(result.program)
    # A failure printed after the summary still means the run failed; dedupe repeats per rank.
    result.failures = list(dict.fromkeys(result.failures))
    if result.failures:
        result.problems.append("nccl-tests failed: " + "; ".join(result.failures))
    if not result.rows and not result.failures:
        result.problems.append("no result rows")
    elif result.rows and not result.complete and not result.failures:
        result.problems.append("the output ends before the summary lines (killed, timed out or cut off)")
    bad = [r.size_bytes for r in result.rows if result.row_corrupted(r)]
    if bad:
        result.problems.append(f"wrong values reported at {len(bad)} size(s): "
                               + ", ".join(str(s) for s in bad[:8]))
    if result.out_of_bounds:
        result.problems.append(f"Out of bounds values: {result.out_of_bounds} (nccl-tests counted wrong results)")
    if result.validation == 0:
        result.problems.append("validation was off (-c 0): wrong results cannot be detected; keep -c 1")


# -- JSON -------------------------------------------------------------------------------------

def _jfloat(value: object) -> float | None:
    """A JSON number as nccl-tests writes it: ``%lf``, ``"nan"`` for NaN, null for not checked."""
    if value is None:
        return None
    if isinstance(value, str):
        return math.nan if value.strip().lower() == "nan" else float(value)
    if isinstance(value, (int, float)):
        return float(value)
    raise ValueError(f"not a number: {value!r}")


def _jbool(value: object) -> bool | None:
    """nccl-tests writes booleans as the strings "true"/"false" (``jsonBool`` -> ``jsonStr``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    return None


def _jhalf(half: Mapping[str, object] | None, stats: Mapping[str, object] | None) -> Half | None:
    if not half:
        return None
    time = _jfloat(half.get("time", half.get("cpu_time")))
    alg, bus = _jfloat(half.get("alg_bw")), _jfloat(half.get("bus_bw"))
    if time is None or alg is None or bus is None:
        raise ValueError("a result without time or bandwidth")
    s = stats or {}
    times = s.get("times_us")
    return Half(time_us=time, algbw_GBps=alg, busbw_GBps=bus, wrong=_jfloat(half.get("nwrong")),
                i_min_us=_jfloat(s.get("min_us")), i_max_us=_jfloat(s.get("max_us")),
                i_p99_us=_jfloat(s.get("p99_us")), i_cv_pct=_jfloat(s.get("cv_pct")),
                i_avg_us=_jfloat(s.get("avg_us")), i_p50_us=_jfloat(s.get("p50_us")),
                i_p95_us=_jfloat(s.get("p95_us")), i_stdev_us=_jfloat(s.get("stdev_us")),
                iteration_times_us=tuple(float(t) for t in times) if isinstance(times, list) else None)


def parse_json(text: str) -> PerfResult:
    """Parse the file written by ``-J FILE.json`` (nccl-tests 2.17.3+, ``src/util.cu``).

    Layout (``JSON_FILE_VERSION`` 1 in 2.17.3-2.19.1, 2 from 2.19.2 with per-iteration
    objects, 3 from 2.19.6 with ``skipped_iterations``/``per_iter_skip``)::

        {"version": 3, "start_time": "...", "args": [...], "env": [...], "nccl_version": 23007,
         "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor" |
                    "step_bytes", "warmup_iters", "iterations", "aggregated_iterations",
                    "validation", "graph", "blocking_collectives", "per_iter_timing",
                    "per_iter_skip", "parallel_init", "devices": [{"rank", "group", "pid",
                    "hostname", "device", "device_hex", "device_info"}]},
         "results": [{"size", "count", "type", "redop", "root": "    -1",
                      "out_of_place": {"time" | "cpu_time", "alg_bw", "bus_bw", "nwrong"} | null,
                      "out_of_place_per_iter": {"min_us", "max_us", "avg_us", "p50_us", "p95_us",
                                                "p99_us", "stdev_us", "cv_pct", "times_us"},
                      "in_place": {...}, "in_place_per_iter": {...},
                      "actual_iterations", "experiment_name"}],
         "out_of_bounds": {"count", "okay"},
         "average_bus_bandwidth": {"bandwidth", "okay"}, "errors": [...], "end_time": "..."}

    Quirks kept from the source: booleans are the strings ``"true"``/``"false"``, NaN is the
    string ``"nan"``, ``nwrong`` is null without validation, 2.17.3-2.17.9 spelled
    ``average_bus_bandwidith``/``bandwidith`` (fixed in 85ca91d). A run killed before
    ``jsonOutputFinalize`` leaves the file unclosed: that is reported in ``problems`` and the
    text output should be used instead. ``env`` holds the whole environment of the run (tokens
    included): it is never copied into the result, and the caller should not keep the file.
    """
    result = PerfResult()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        result.problems.append(f"the JSON output is incomplete or invalid ({exc.msg} at character "
                               f"{exc.pos}): nccl-tests was killed before it closed the file")
        return result
    if not isinstance(data, dict):
        result.problems.append("the JSON output is not an object")
        return result
    code = data.get("nccl_version")
    if isinstance(code, int):
        result.nccl_version = _code_to_version(code)
    args = data.get("args")
    if isinstance(args, list):
        result.args = [str(a) for a in args]
        if result.args:
            result.program = result.args[0].rsplit("/", 1)[-1]
            result.collective = collective_name(result.program)
    config = data.get("config") or {}
    if isinstance(config, dict):
        result.n_threads = config.get("nthreads")
        result.n_gpus = config.get("ngpus")
        result.min_bytes = config.get("minimum_bytes")
        result.max_bytes = config.get("maximum_bytes")
        result.warmup_iters = config.get("warmup_iters")
        result.iters = config.get("iterations")
        result.agg_iters = config.get("aggregated_iterations")
        result.validation = config.get("validation")
        result.graph = config.get("graph")
        for d in config.get("devices") or []:
            result.devices.append(RankDevice(rank=d.get("rank"), group=d.get("group"), pid=d.get("pid"),
                                             host=d.get("hostname"), device=d.get("device"),
                                             bus_id=d.get("device_hex", ""), name=d.get("device_info", "")))
    result.error_column = "#wrong"
    for entry in data.get("results") or []:
        try:
            root = entry.get("root")
            result.rows.append(PerfRow(
                size_bytes=int(entry["size"]), count=int(entry["count"]), dtype=str(entry.get("type")),
                redop=entry.get("redop"), root=int(root) if root not in (None, "") else None,
                out_of_place=_jhalf(entry.get("out_of_place"), entry.get("out_of_place_per_iter")),
                in_place=_jhalf(entry.get("in_place"), entry.get("in_place_per_iter"))))
        except (KeyError, TypeError, ValueError) as exc:
            result.problems.append(f"an unreadable JSON result ({exc}): {str(entry)[:120]}")
    oob = data.get("out_of_bounds")
    if isinstance(oob, dict) and "count" in oob:
        result.out_of_bounds = int(oob["count"])
    avg = data.get("average_bus_bandwidth", data.get("average_bus_bandwidith"))
    if isinstance(avg, dict):
        result.avg_busbw_GBps = _jfloat(avg.get("bandwidth", avg.get("bandwidith")))
        okay = avg.get("okay")
        result.avg_busbw_check = None if okay == "unchecked" else ("OK" if _jbool(okay) else "FAILED")
        result.complete = True
    for error in data.get("errors") or []:
        if error:
            result.failures.append(f"NCCL last error: {error}")
    if "end_time" not in data:
        result.problems.append("the JSON output has no end_time: the run did not finish normally")
    _finish(result)
    return result


def _merge_json(result: PerfResult, json_text: str) -> None:
    """Take the JSON's rows (full precision) when the JSON is whole; keep the text's rest."""
    parsed = parse_json(json_text)
    if parsed.rows and parsed.complete:
        result.rows = parsed.rows
        result.error_column = parsed.error_column
        result.problems = [p for p in result.problems if not p.startswith("size ")]
    else:
        result.problems.extend(f"JSON: {p}" for p in parsed.problems)


# -- a screen run's outcome -------------------------------------------------------------------

def screen_status(result: PerfResult, *, killed_at_timeout: bool = False,
                  exit_code: int | None = None) -> tuple[Status, str]:
    """(status, cause) for ``screen.csv``: what one screen run of one set came to.

    ``INVALID_OUTPUT`` when nccl-tests reported wrong values (the corruption guard; it wins over
    every other outcome), ``TIMEOUT`` when the caller killed the run at ``timeout_s``, ``HUNG``
    when nccl-tests' own ``-T`` timer fired, ``CRASHED`` for a failure line, a non-zero exit
    with no rows, or an output cut short, else ``OK``: a run that exited 0 with a complete table
    is never ``CRASHED`` (a failure line it printed is named in the cause). ``cause`` is one line. The guard needs
    validation on: with ``-c 0`` nccl-tests prints ``N/A`` and nothing can be detected.
    """
    if result.corrupted:
        bad = [r.size_bytes for r in result.rows if result.row_corrupted(r)]
        where = f" at {', '.join(map(str, bad[:4]))} B" if bad else ""
        return Status.INVALID_OUTPUT, f"nccl-tests reported wrong values{where} (out of bounds: {result.out_of_bounds})"
    if killed_at_timeout:
        return Status.TIMEOUT, f"killed at the screen timeout after {len(result.rows)} row(s)"
    if any("timed out a collective" in f for f in result.failures):
        return Status.HUNG, result.failures[0]
    if result.failures and not (exit_code == 0 and result.rows and result.complete):
        return Status.CRASHED, result.failures[0]
    if not result.rows:
        return Status.CRASHED, f"no result rows (exit code {exit_code})"
    if not result.complete:
        return Status.CRASHED, f"output cut off after {len(result.rows)} row(s) (exit code {exit_code})"
    if exit_code not in (None, 0):
        return Status.CRASHED, f"exit code {exit_code} after a complete table"
    if result.failures:  # exit 0 and every row: the table stands; say what else was printed
        return Status.OK, f"ok (a complete table and exit code 0; it also printed {result.failures[0]!r})"
    return Status.OK, "ok"
