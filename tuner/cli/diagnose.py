"""``nccl-tune diagnose CONFIG``: one launch with NCCL's TUNING log, what NCCL picks per
allreduce size and who carries the decode allreduce (:mod:`tuner.diagnose`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tuner.cli.common import Help, hold_gpus, positive, study_name, study_name_from
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``diagnose`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    d = sub.add_parser("diagnose", help="one launch with NCCL's TUNING log: what NCCL picks per allreduce size, "
                                        "and who carries the decode allreduce", formatter_class=Help)
    d.add_argument("config", help="experiment TOML (see examples/)")
    d.add_argument("--results", type=Path, default=Path("results"), help="results root")
    d.add_argument("--study", type=study_name, help="study name (default: the config file's stem)")
    d.add_argument("--max-tokens", type=positive(int), default=64, help="tokens per probe completion")
    d.add_argument("--repeats", type=positive(int), default=2, help="probe completions")
    d.add_argument("--model-config", type=Path,
                   help="the model's config.json, to size the decode allreduce (default: [model] config)")
    d.add_argument("--json", action="store_true", help="print diagnose.json instead of the tables")


def run(args: argparse.Namespace) -> int:
    """Launch once, write diagnose.json and diagnose.md under the study's folder and print them;
    returns 0 (a failed launch raises TrialFailed, exit 1)."""
    import json

    from tuner import diagnose
    from tuner.inputs import load_config
    from tuner.study import check_processes, gpus_of

    cfg = load_config(args.config, resolve_space=False)
    study = args.study or study_name_from(args.config)
    study_dir = args.results / study
    size = diagnose.model_decode_size(cfg, args.model_config)
    diagnose.check_inputs(cfg, args.results)
    hold_gpus(args, cfg, study, "diagnose")  # its launch must not share a GPU with a worker either
    check_processes(gpus_of(cfg))  # nor with a compute process NVML lists on them
    diag = diagnose.run(cfg, study_dir, study=study, max_tokens=args.max_tokens, repeats=args.repeats,
                        decode_size=size, log=lambda text: print(text, file=sys.stderr), space_files=_space_files(cfg))
    json_path, md_path = diagnose.write_diagnosis(diag, study_dir)
    if args.json:
        print(json.dumps(diag.to_json(), indent=2))
    else:
        diagnose.print_diagnosis(diag)
        print(f"\nwrote {md_path}, {json_path}; server log {diag.launch['log']}")
    return ExitCode.OK


def _space_files(cfg: Any) -> dict[str, tuple[str, ...]]:
    """The graph/topology files of the config's search space, for diagnose's triage: only when
    the space names one of those variables (then the space is loaded, and a bad file is an
    InputError, exit 2, before the launch); empty when the space file is not found."""
    from tuner.inputs import find_path, load_space
    from tuner.nccl import FILE_VARS

    found = find_path(cfg.sweep.space, cfg.path, bundled=True)
    path = found[0] if found is not None else None
    if path is None or not any(name in path.read_text(errors="replace") for name in FILE_VARS):
        return {}
    return load_space(path, allow_unsafe=True, version=cfg.nccl.nccl_version).files()
