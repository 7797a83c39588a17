"""A Slurm step: ``srun [OPTIONS] SERVER [ARGS]``. slurmstepd on the allocated node starts the
task, not the srun client nccl-tune launches.

* The set: srun's ``--export`` (default ``ALL``, or ``SLURM_EXPORT_ENV``) says what the task
  gets: ``ALL`` (alone or with names) every variable of srun's environment; ``NONE`` none but
  ``SLURM_*``; a list ``NAME[,NAME=VALUE]`` those names and ``SLURM_*`` (srun(1), ``--export``,
  Slurm 23.02). With ``ALL`` nothing is added; with ``NONE`` or a list, the launch's names are
  written into it (``--export=NAME1,NAME2,...``: their values copied from srun's environment,
  which nccl-tune sets). A ``NAME=VALUE`` in the list (``--export=ALL,NCCL_PROTO=Simple``) is the
  command's own fix (:meth:`SlurmStep.env_fixes`): the task gets that value, not srun's.
* Teardown: SIGTERM to srun, which forwards it to the tasks (srun(1), "SIGNALS AND ESCAPE
  SEQUENCES"); then, inside an allocation (``SLURM_JOB_ID``), the step is looked up by its name
  (``--job-name``, added when the command has none) with ``squeue --steps`` and cancelled with
  ``scancel JOBID.STEPID`` while it is still listed (bounded).
* The host's paths: a model path is the compute node's; checked only when it exists here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping, Sequence

from tuner.launchers.base import EnvFix, Launcher, Stopped, Wrappers, run_quiet
from tuner.redaction import redact_argv

__all__ = ["GONE_WAIT_S", "SlurmStep", "is_srun"]

#: srun's one-letter options that take a value (srun(1)).
_SHORT_VALUES = frozenset("AbcDdeiJLmnNopqtwxWGCMTrSB")
#: srun's long options that take no value (or only one written with ``=``).
_LONG_FLAGS = frozenset({"--exclusive", "--overlap", "--pty", "--unbuffered", "--label", "--verbose", "--quiet",
                         "--exact", "--overcommit", "--no-kill", "--kill-on-bad-exit", "--immediate", "--hold",
                         "--multi-prog", "--test-only", "--disable-status", "--help", "--usage", "--contiguous",
                         "--spread-job", "--oversubscribe", "--reboot", "--wait-all-nodes"})
#: How long a cancelled step may take to leave squeue's list (s).
GONE_WAIT_S = 15.0


class SlurmStep(Launcher):
    """``srun``: see the module docstring. ``environ``: srun's own environment (for
    ``SLURM_EXPORT_ENV`` and ``SLURM_JOB_ID``; default ``os.environ``)."""

    name = "a Slurm step (srun)"
    #: srun(1): a step that cannot get its resources now ("Requested nodes are busy", "Job step
    #: creation temporarily disabled") waits or fails whatever the environment.
    machine_lines = ((r"Requested nodes are busy|Job step creation temporarily disabled|Unable to create step",
                      "Slurm resources busy"),)
    listener_outside = "a Slurm step's listener (slurmstepd starts the task, not srun)"

    def __init__(self, argv: Sequence[str], wrappers: Wrappers, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(argv, wrappers)
        self.environ = dict(os.environ if environ is None else environ)
        self.export: str | None = None  # the --export value as written
        self.export_at: tuple[int, int] | None = None  # (first, last) index of the --export words
        self.job_name: str | None = None
        self.program_at = len(self.argv)
        self._read()
        self.step: str | None = None  # the step's name, after prepare

    def _read(self) -> None:
        argv, i = self.argv, self.start + 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            arg, first = argv[i], i
            if arg.startswith("--"):
                key, eq, value = arg.partition("=")
                if not eq and key not in _LONG_FLAGS:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
            else:
                key, value = arg[:2], arg[2:]
                if not value and arg[1:2] in _SHORT_VALUES:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
            if key == "--export":
                self.export, self.export_at = value, (first, i)
            elif key in ("-J", "--job-name"):
                self.job_name = value
            i += 1
        self.program_at = i + (1 if i < len(argv) and argv[i] == "--" else 0)

    def _mode(self) -> str:
        """srun's export mode: ``ALL``, ``NONE`` or ``LIST`` (its value, else SLURM_EXPORT_ENV)."""
        value = self.export if self.export is not None else self.environ.get("SLURM_EXPORT_ENV", "ALL")
        words = [w.strip().upper() for w in value.split(",")]
        if "ALL" in words:
            return "ALL"
        return "NONE" if words in (["NONE"], ["NIL"]) else "LIST"

    def prepare(self, forward: Collection[str], mounts: Collection[str] = (), token: str = "") -> list[str]:
        argv = list(self.argv)
        self.step = self.job_name or f"nccl-tune-{token or os.getpid()}"
        added = [] if self.job_name else [f"--job-name={self.step}"]
        mode = self._mode()
        if mode != "ALL" and forward:
            given = [] if mode == "NONE" else [w for w in (self.export or self.environ.get("SLURM_EXPORT_ENV", ""))
                                               .split(",") if w]
            have = {w.partition("=")[0] for w in given}
            value = ",".join(given + sorted(n for n in forward if n not in have))
            if self.export_at is not None:
                first, last = self.export_at
                argv[first:last + 1] = [f"--export={value}"]
            else:
                added.append(f"--export={value}")
        at = self.start + 1
        return self._sudo(argv[:at] + added + argv[at:], forward)

    def env_fixes(self) -> list[EnvFix]:
        written = self.export is not None
        value = self.export if self.export is not None else self.environ.get("SLURM_EXPORT_ENV", "")
        said = "--export=" if written else "SLURM_EXPORT_ENV="
        out = super().env_fixes()
        for word in value.split(","):
            name, eq, fixed = word.partition("=")
            if eq and name:
                out.append(EnvFix(name.strip(), fixed, f"{said}{value}"))
        return out

    def handle(self) -> list[str]:
        if self.step is None:
            return []
        return [self.argv[self.start], f"--job-name={self.step}", "nccl-tune-leftover"]

    def plan(self, fixed: Collection[str], varied: Collection[str] = ()) -> str | None:
        mode = self._mode()
        if mode == "ALL":
            return ("server.command runs a Slurm step (srun) with --export=ALL (its default): the step gets "
                    "srun's environment, the set included; at teardown srun forwards SIGTERM and a step still "
                    "listed is cancelled (scancel)")
        written = f"--export={self.export}" if self.export is not None else \
            f"SLURM_EXPORT_ENV={self.environ.get('SLURM_EXPORT_ENV')}"
        names = ", ".join(sorted(set(fixed) | set(varied)))
        listed = " and ".join(w for w in (names, "" if varied else "each variable of the set") if w)
        written = redact_argv([written])[0]  # --export=ALL,HF_TOKEN=x: shown as HF_TOKEN=***
        return (f"server.command runs a Slurm step (srun) with {written}: nccl-tune writes the launch's names "
                f"into --export{f' ({listed})' if listed else ''} so the step gets them; at teardown "
                "srun forwards SIGTERM and a step still listed is cancelled (scancel)")

    def server_argv(self) -> list[str]:
        return self.argv[self.program_at:]

    def host_path(self, path: str) -> tuple[str | None, str]:
        if os.path.exists(path):
            return path, ""
        return None, f"{path} is the Slurm step's, on its compute node: not found here, not checked"

    # -- teardown -------------------------------------------------------------------------------
    def _steps(self) -> tuple[list[str] | None, str]:
        """The ids (``JOBID.STEPID`` or ``JOBID``) squeue lists under the step's name; None when
        squeue does not answer (with why)."""
        job = self.environ.get("SLURM_JOB_ID")
        where = ["--steps", f"--jobs={job}"] if job else ["--me", f"--name={self.step}"]
        code, out = run_quiet(["squeue", *where, "--noheader", "--format=%i %j"], 15.0)
        if code != 0:
            return None, out.splitlines()[-1] if out else f"exit {code}"
        return [cols[0] for cols in (line.split() for line in out.splitlines())
                if len(cols) >= 2 and cols[1] == self.step], ""

    def stop(self, grace_s: float) -> Stopped:
        if self.step is None:
            return Stopped()
        deadline = time.monotonic() + grace_s + GONE_WAIT_S
        cancelled = False
        while True:
            ids, why = self._steps()
            if ids is None:
                return Stopped(f"Slurm step {self.step}: squeue did not answer ({why}); not checked")
            if not ids:
                return Stopped(f"Slurm step {self.step} " + ("cancelled" if cancelled else "gone"))
            if time.monotonic() >= deadline:
                return Stopped(f"Slurm step {', '.join(ids)} still running",
                               (f"Slurm step {', '.join(ids)} ({self.step}) still listed after scancel",))
            for step_id in ids:
                run_quiet(["scancel", step_id], 15.0)
            cancelled = True
            time.sleep(0.5)


def is_srun(argv: Sequence[str], start: int) -> bool:
    """True when ``argv[start]`` is srun."""
    return start < len(argv) and os.path.basename(argv[start]) == "srun"
