"""``diagnose.json`` and ``diagnose.md`` in a study's results folder: written after a diagnose
launch (:func:`write_diagnosis`), read by a later sweep of the same study (:func:`load_diagnosis`)."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.diagnose.model import SCHEMA, Diagnosis
from tuner.diagnose.render import markdown

__all__ = ["JSON_NAME", "load_diagnosis", "write_diagnosis"]

JSON_NAME, MD_NAME = "diagnose.json", "diagnose.md"


def load_diagnosis(study_dir: str | Path) -> Diagnosis | None:
    """The :class:`Diagnosis` in ``study_dir/diagnose.json``, or None when there is none or it
    cannot be read (another schema, a truncated file)."""
    path = Path(study_dir) / JSON_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            return None
        return Diagnosis.from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_diagnosis(diag: Diagnosis, study_dir: Path) -> tuple[Path, Path]:
    """Write ``diagnose.json`` and ``diagnose.md`` into ``study_dir``; returns both paths."""
    study_dir.mkdir(parents=True, exist_ok=True)
    js, md = study_dir / JSON_NAME, study_dir / MD_NAME
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(diag.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(js)  # a sweep reading it never sees half a file
    md.write_text(markdown(diag), encoding="utf-8")
    return js, md
