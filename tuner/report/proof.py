"""The proof section of the report: for each relaunched set, what NCCL echoed rank by rank.

Reads each record's ``nccl_proof`` rows (:func:`tuner.nccl.proof.confirmations`, stored by
:func:`tuner.sweep.evidence.read`); nothing is parsed again. The baseline launches no variable
and has no row.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tuner.record import Kind, TrialRecord
from tuner.report.model import Block, Section, table_block

__all__ = ["proof_section"]

#: The proof table's columns, in order.
PROOF_COLUMNS = ("trial", "variable", "status", "ranks that echoed it", "value echoed", "source", "why")


def proof_frame(records: Sequence[TrialRecord]) -> pd.DataFrame:
    """One row per (trial, launched variable) of the relaunched records that carry a proof:
    :data:`PROOF_COLUMNS`. Empty (with those columns) when none does."""
    rows = [(r.trial, p.get("name", ""), p.get("status", ""), p.get("ranks", ""), p.get("echo", ""),
             p.get("source", ""), p.get("why", ""))
            for r in records if r.kind.relaunched for p in r.nccl_proof]
    return pd.DataFrame(rows, columns=list(PROOF_COLUMNS))


def behind_words(r: TrialRecord) -> str:
    """What trial ``r`` says of the NCCL variables its processes read that its launch did not set
    (``nccl_unlaunched``), each with where it came from where known (``nccl_unlaunched_from``):
    a baseline with any is called "not untuned", never "untuned"."""
    said = "; ".join(f"{k}={v}" + (f" (from {r.nccl_unlaunched_from[k]})" if r.nccl_unlaunched_from.get(k) else "")
                     for k, v in r.nccl_unlaunched.items())
    unknown = [k for k in r.nccl_unlaunched if not r.nccl_unlaunched_from.get(k)]
    where = (" (set where those processes start: `ray start`, the image, a conf file, or the server itself)"
             if unknown else "")
    if r.kind is Kind.BASELINE:
        return (f"Trial {r.trial} (baseline): set behind nccl-tune's back: {said}{where}. This baseline is not "
                f"untuned: it ran with {', '.join(r.nccl_unlaunched)} as set there.")
    return f"Trial {r.trial} ({r.kind}): NCCL read {said}, which the launch did not set{where}."


def proof_section(records: Sequence[TrialRecord]) -> Section | None:
    """The proof section: the proof table, and the trials whose ranks read NCCL variables the
    launch did not set (a baseline that is not untuned there); None when no trial carries either
    (studies recorded before proofs were kept)."""
    df = proof_frame(records)
    stray = [r for r in records if r.kind.relaunched and r.nccl_unlaunched]
    if df.empty and not stray:
        return None
    blocks = []
    if not df.empty:
        blocks += [Block("paragraph", "Each launched variable against what NCCL echoed (`NAME set by environment to "
                         "VALUE`, src/misc/param.cc) on every rank of its communicator. Source: `NCCL_DEBUG_FILE` is "
                         "NCCL's own per-process file (whole lines, kept at SIGKILL); `server log` is the server's "
                         "piped output, lines cut by the pipe rejoined."), table_block(df)]
    for r in stray:
        blocks.append(Block("paragraph", behind_words(r)))
    return Section("proof", "Proof that each set reached NCCL", tuple(blocks))
