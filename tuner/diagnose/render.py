"""The diagnosis as text: the report's head (:func:`summary_rows`), NCCL's TUNING table
(:func:`tuning_table`), its choice per size (:func:`sizes_table`), on a console
(:func:`print_diagnosis`) or as ``diagnose.md`` (:func:`markdown`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.diagnose.model import DecodeInfo, Diagnosis, TuningRow
from tuner.nccl import TuningTable
from tuner.plaintext import plain_table
from tuner.triage import Triage

__all__ = ["markdown", "print_diagnosis"]

_PROTOS = ("LL", "LL128", "Simple")


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n:,} B"


def _pick_text(d: DecodeInfo) -> str:
    if d.algorithm is None:
        return "unknown (no per-operation line at this size, no TUNING table)"
    ch = f", {d.channels} channel{'s' if d.channels != 1 else ''}" if d.channels else ""
    return f"{d.algorithm}/{d.protocol}{ch}"


def summary_rows(diag: Diagnosis) -> list[tuple[str, str]]:
    """``(what, value)`` lines of the report's head: version, ranks, topology, channels, backend,
    decode size and pick, prefill sizes, echoed variables, warnings."""
    t, b, d = diag.topology, diag.backend, diag.decode
    version = diag.nccl_version or (f"{diag.server_nccl_version} (named by the server)"
                                    if diag.server_nccl_version else "not logged")
    if diag.cuda_version:
        version += f" (CUDA {diag.cuda_version})"
    ranks = t.get("ranks_logged") or []
    rank_text = f"{t.get('nranks') or '?'} ranks" + (f", {len(ranks)} logged" if ranks else "")
    link = f"{t.get('link') or 'link unknown'}, {t.get('nnodes') or '?'} node(s)"
    if t.get("has_nvls"):
        link += ", NVLS"
    channels = f"{t['coll_channels']} coll" if t.get("coll_channels") is not None else "not logged"
    if t.get("nvls_channels"):
        channels += f", {t['nvls_channels']} nvls"
    thr = t.get("thread_thresholds")
    rows = [("NCCL version", version), ("ranks", rank_text), ("topology", link), ("channels", channels)]
    if thr:
        rows.append(("thread thresholds", f"Tree {thr[0]}/{thr[1]}/{thr[2]} | Ring {thr[3]}/{thr[4]}/{thr[5]} "
                                          "(LL/LL128/Simple)"))
    if t.get("transports"):
        rows.append(("transports", ", ".join(t["transports"])))
    rows.append(("decode backend", f"{b['name']}: {b['reason']}"))
    rows.append(("decode size", f"{_fmt_bytes(d.nbytes)} ({d.size_reason})"))
    if b["nccl_on_decode_path"] is False:
        rows.append(("decode pick", f"not NCCL: {b['name']} carries it; NCCL variables cannot act on decode"))
    else:
        rows.append(("decode pick", f"NCCL {_pick_text(d)}" + (f" ({d.pick_source})" if d.pick_source else "")))
    rows.append(("prefill size(s)", ", ".join(_fmt_bytes(n) + _rows_of(n, d.nbytes) for n in diag.prefill_bytes)
                 or ("none logged during the probe" if diag.probe else "no probe in this log")))
    echoed = [f"{name}={'|'.join(vals)}" for name, vals in diag.echoed.items()]
    rows.append(("echoed by NCCL", ", ".join(echoed) or "none"))
    rows += [("NCCL refused", f"{k}={v}") for k, v in diag.invalid.items()]
    rows += [("NCCL WARN", w) for w in diag.warnings[:10]]
    return rows


def _rows_of(n: int, decode: int | None) -> str:
    return f" ({n // decode} tokens)" if decode and n % decode == 0 and n > decode else ""


def tuning_table(diag: Diagnosis) -> Table:
    """NCCL's AllReduce TUNING table: one row per algorithm, ``latency us / bandwidth GB/s`` per
    protocol ("off" where the bandwidth is 0), and the model time at the decode size."""
    table = Table(title="AllReduce TUNING table (latency us / bandwidth GB/s)", box=None, header_style="bold",
                  title_justify="left", pad_edge=False)
    nbytes = diag.decode.nbytes
    for col in ("algorithm", *_PROTOS, *([f"time at {nbytes} B"] if nbytes else [])):
        table.add_column(col, no_wrap=True)
    by_algo: dict[str, dict[str, TuningRow]] = {}
    for r in diag.tuning:
        by_algo.setdefault(r.algorithm, {})[r.protocol] = r
    for algo, cells in by_algo.items():
        if not any(c.bandwidth_gbps > 0 for c in cells.values()):
            continue
        texts = [_cell(cells.get(p)) for p in _PROTOS]
        extra = [_model_time(diag, algo, nbytes)] if nbytes else []
        table.add_row(algo, *texts, *extra)
    return table


def _cell(r: TuningRow | None) -> str:
    if r is None or r.bandwidth_gbps <= 0:
        return "off"
    return f"{r.latency_us:.1f} / {r.bandwidth_gbps:.1f}"


def _model_time(diag: Diagnosis, algo: str, nbytes: int) -> str:
    table = TuningTable({"AllReduce": {(r.algorithm, r.protocol): (r.latency_us, r.bandwidth_gbps)
                                                for r in diag.tuning}})
    times = [(t, p) for p in _PROTOS if (t := table.time_us("AllReduce", algo, p, nbytes)) is not None]
    return ", ".join(f"{p} {t:.1f} us" for t, p in times) or "-"


def sizes_table(diag: Diagnosis) -> Table:
    """Per collective size: bytes, NCCL's algorithm/protocol/channels, calls (during the probe),
    role (decode, prefill, start-up, probe)."""
    table = Table(title="What NCCL chose per size (per-operation TUNING lines)", box=None, header_style="bold",
                  title_justify="left", pad_edge=False)
    for col in ("collective", "bytes", "algorithm", "protocol", "channels", "calls", "in probe", "role"):
        table.add_column(col, justify="right" if col in ("bytes", "channels", "calls", "in probe") else "left",
                         no_wrap=True)
    for r in diag.sizes:
        role = "<- decode" if r.role == "decode" else r.role
        if r.choices:
            role += "  (varied: " + ", ".join(f"{c['algorithm']}/{c['protocol']} x{c['calls']}" for c in r.choices) + ")"
        table.add_row(r.func, f"{r.nbytes:,}", r.algorithm or "?", r.protocol or "?",
                      "-" if r.channels is None else str(r.channels), str(r.calls), str(r.probe_calls), Text(role))
    return table


def print_diagnosis(diag: Diagnosis, console: Console | None = None) -> None:
    """Print the report: the summary, the TUNING table, the per-size table, the notes. On a
    terminal rich lays tables out; piped, every row is one whole line."""
    console = console or Console()
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column("what", no_wrap=True, style="bold")
    head.add_column("value", overflow="fold")
    for what, value in summary_rows(diag):
        head.add_row(what, Text(value))
    tables = [head] + ([tuning_table(diag)] if diag.tuning else []) + ([sizes_table(diag)] if diag.sizes else [])
    for table in tables:
        if console.is_terminal:
            console.print(table)
        else:
            console.out(plain_table(table), highlight=False)
        console.out("")
    for line in triage_lines(diag):
        console.out(f"triage: {line}", highlight=False)
    for note in diag.notes:
        console.out(f"note: {note}", highlight=False)


def triage_lines(diag: Diagnosis) -> list[str]:
    """The triage's lines (:meth:`tuner.triage.Triage.lines`), none for a diagnosis without one."""
    return Triage.from_dict(diag.triage).lines() if diag.triage else []


def markdown(diag: Diagnosis) -> str:
    """``diagnose.md``: the same content as :func:`print_diagnosis`, as GitHub markdown."""
    def esc(text: object) -> str:
        return str(text).replace("|", "\\|")

    out = [f"# What NCCL chose: {diag.study}", "", "| | |", "|---|---|"]
    out += [f"| {esc(k)} | {esc(v)} |" for k, v in summary_rows(diag)]
    if diag.tuning:
        nb = diag.decode.nbytes
        out += ["", "## AllReduce TUNING table (latency us / bandwidth GB/s)", "",
                "| algorithm | " + " | ".join(_PROTOS) + (f" | time at {nb} B |" if nb else " |"),
                "|---" * (len(_PROTOS) + 1 + bool(nb)) + "|"]
        for algo in dict.fromkeys(r.algorithm for r in diag.tuning):
            cells = {r.protocol: r for r in diag.tuning if r.algorithm == algo}
            if any(c.bandwidth_gbps > 0 for c in cells.values()):
                out.append(f"| {algo} | " + " | ".join(_cell(cells.get(p)) for p in _PROTOS)
                           + (f" | {_model_time(diag, algo, nb)} |" if nb else " |"))
    if diag.sizes:
        out += ["", "## What NCCL chose per size", "",
                "| collective | bytes | algorithm | protocol | channels | calls | in probe | role |",
                "|---|---:|---|---|---:|---:|---:|---|"]
        for r in diag.sizes:
            role = f"**{r.role}**" if r.role == "decode" else r.role
            out.append(f"| {r.func} | {r.nbytes:,} | {r.algorithm or '?'} | {r.protocol or '?'} | "
                       f"{'-' if r.channels is None else r.channels} | {r.calls} | {r.probe_calls} | {role} |")
    if diag.triage:
        out += ["", "## NCCL's model of the machine", "", *(f"- {esc(line)}" for line in triage_lines(diag))]
    if diag.notes:
        out += ["", "## Notes", ""] + [f"- {esc(n)}" for n in diag.notes]
    if diag.launch:
        out += ["", f"Server log: `{diag.launch.get('log', '')}`"]
    return "\n".join(out) + "\n"
