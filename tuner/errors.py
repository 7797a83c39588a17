"""One exception tree: every error nccl-tune reports carries the exit status it ends with.

Like httpx (one hierarchy under ``HTTPError``, drawn in its ``_exceptions.py``) and Optuna
(``OptunaError``), every error the package raises on purpose derives from :class:`NcclTuneError`;
``tuner.cli.main`` maps it to a one-paragraph message and ``exit_code`` in one place. The exit
codes are :class:`ExitCode`, the one list the README's "Exit status" table is checked against.
The tree, each class with its exit status (``tests/unit/test_errors.py`` holds it to the classes)::

    * NcclTuneError (exit 1, PROBE_FAILED): the root; its status unless a class names its own
      * InputError (exit 2, BAD_INPUT): a file, key or flag holds a value not accepted
        * StorageUnreadable (exit 2, BAD_INPUT): the --storage URL cannot be opened
        * NewerFormat (exit 2, BAD_INPUT): a newer nccl-tune stored the study
        * ResumeRefused (exit 2, BAD_INPUT): a resume changed the config, the space or the metric
        * LauncherRefused (exit 2, BAD_INPUT): the command's launcher cannot pass the set to the server
      * MachineNotClean (exit 3, MACHINE_NOT_CLEAN): the machine is not safe to go on with
        * PortBusy (exit 3, MACHINE_NOT_CLEAN): server.port could not be bound
        * ForeignListener (exit 3, MACHINE_NOT_CLEAN): another process answers on server.port
        * GpusInUse (exit 3, MACHINE_NOT_CLEAN): another worker or process holds the GPUs
      * BaselineFailed (exit 4, BASELINE_FAILED): the untuned baseline failed
      * MachineFailed (exit 8, MACHINE_FAULT): launches failed the machine's way, the baseline's too; resumable
      * StoppedByCheck (exit 5, STOPPED_BY_CHECK): a check stopped the sweep (--force overrides)
      * NoLongerHolds (exit 6, NO_LONGER_HOLDS): check: the set is no longer faster
      * NotJudged (exit 7, NOT_JUDGED): check: the set could not be judged
      * Interrupted (exit 129/130/143, SIGHUP/SIGINT/SIGTERM): a signal; the study is resumable
      * TrialFailed (exit 1, PROBE_FAILED): one relaunch failed (the sweep records it and goes on)
        * MachineFault (exit 1, PROBE_FAILED): the machine failed the relaunch, not the set
        * ServerListensElsewhere (exit 1, PROBE_FAILED): the server announced another port
      * ProbeError (exit 1, PROBE_FAILED): a probe or bench request failed
        * ProbeHTTPError (exit 1, PROBE_FAILED): the server answered HTTP >= 400
        * ProbeStalled (exit 1, PROBE_FAILED): no token for the stall timeout
          * ProbeNoAnswer (exit 1, PROBE_FAILED): not even response headers
          * ProbeFirstTokenLate (exit 1, PROBE_FAILED): headers, then no first token
        * ProbeDisconnected (exit 1, PROBE_FAILED): the stream closed early
        * ProbeConnectError (exit 1, PROBE_FAILED): no connection
        * ProbeIncomplete (exit 1, PROBE_FAILED): fewer tokens than asked
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

__all__ = [
    "EXIT_MEANINGS",
    "BaselineFailed",
    "ExitCode",
    "ForeignListener",
    "GpusInUse",
    "InputError",
    "Interrupted",
    "LauncherRefused",
    "MachineFailed",
    "MachineFault",
    "MachineNotClean",
    "NcclTuneError",
    "NewerFormat",
    "NoLongerHolds",
    "NotJudged",
    "PortBusy",
    "ProbeConnectError",
    "ProbeDisconnected",
    "ProbeError",
    "ProbeFirstTokenLate",
    "ProbeHTTPError",
    "ProbeIncomplete",
    "ProbeNoAnswer",
    "ProbeStalled",
    "ResumeRefused",
    "ServerListensElsewhere",
    "StoppedByCheck",
    "StorageUnreadable",
    "TrialFailed",
    "tolerated",
]


class ExitCode(IntEnum):
    """Exit statuses of ``nccl-tune`` (the simulator's own CLI keeps its own)."""

    OK = 0
    PROBE_FAILED = 1
    BAD_INPUT = 2
    MACHINE_NOT_CLEAN = 3
    BASELINE_FAILED = 4
    STOPPED_BY_CHECK = 5
    NO_LONGER_HOLDS = 6
    NOT_JUDGED = 7
    MACHINE_FAULT = 8
    SIGHUP = 128 + signal.SIGHUP
    SIGINT = 128 + signal.SIGINT
    SIGTERM = 128 + signal.SIGTERM


#: What each exit status means, in the README's words (tests keep the README in step).
EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "the sweep ended (budget, time, target, or space exhausted; a target not "
                 "reached is said in the verdict), its dry run found nothing the sweep would refuse, a "
                 "probe/bench/report succeeded, or `check` found the set still faster than the baseline",
    ExitCode.PROBE_FAILED: ("`probe` or `bench` failed against the server; `diagnose`: its one launch did not start or "
                           "failed the probe (the cause and the server log named)"),
    ExitCode.BAD_INPUT: "bad input (config, space, flags, changed settings on resume)",
    ExitCode.MACHINE_NOT_CLEAN: "the machine is not clean (port held by another process, "
                                "or a listener on it that is not the launched server, processes survived a teardown, another runner of the same study and port alive, "
                                "the GPUs shared with another live worker or a compute process)",
    ExitCode.BASELINE_FAILED: "the untuned baseline failed",
    ExitCode.STOPPED_BY_CHECK: "a check stopped the sweep before spending relaunches "
                               "(`--force` overrides it)",
    ExitCode.NO_LONGER_HOLDS: "`check`: the set no longer holds: on its fresh launches it is not significantly "
                              "faster than the baseline (the reason says by how much, and whether it is slower)",
    ExitCode.NOT_JUDGED: "`check`: the set could not be judged (a launch failed, NCCL did not apply a variable, the "
                         "variables cannot act here, or the baseline moved more than the noise allows); the reason "
                         "names it",
    ExitCode.MACHINE_FAULT: "the machine failed the night: a launch failed in a way that is not the set's (a start-up "
                            "memory guard, a busy device, a container name in use, an address in use) and the "
                            "untuned baseline relaunched after it failed too; run the same command to resume",
    ExitCode.SIGHUP: "hung up (SIGHUP: terminal closed, SSH lost); resumable",
    ExitCode.SIGINT: "interrupted by SIGINT (Ctrl-C); resumable",
    ExitCode.SIGTERM: "terminated by SIGTERM; resumable",
}


class NcclTuneError(Exception):
    """Base of every error nccl-tune raises on purpose; ``exit_code`` is the CLI's status."""

    exit_code: ExitCode = ExitCode.PROBE_FAILED


# -- input -----------------------------------------------------------------------------------

class InputError(NcclTuneError):
    """A user-supplied file or flag holds a value nccl-tune will not accept.

    The message names the file, the key, the offending value and what is accepted, so a user
    can fix it without reading code (``value`` None: the key was not given). ``str(err)`` is that
    message. Several problems of one run
    are joined by :meth:`combine` (one paragraph each).
    """

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, file: str, key: str, value: object, accepted: str, why: str = "") -> None:
        self.file, self.key, self.value, self.accepted, self.why = file, key, value, accepted, why
        self.problems: list[InputError] = [self]
        reason = f" ({why})" if why else ""
        given = "is not given" if value is None else f"has value {value!r}"
        super().__init__(f"{file}: key '{key}' {given}{reason}; accepted: {accepted}.")

    @classmethod
    def combine(cls, problems: list[InputError]) -> InputError:
        """One error carrying every problem of ``problems`` (non-empty); ``str`` lists each."""
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        err = cls(first.file, first.key, first.value, first.accepted, first.why)
        err.problems = list(problems)
        err.args = (f"{len(problems)} problems:\n" + "\n".join(f"- {p}" for p in problems),)
        return err


#: What ``--storage`` accepts, in an error's words.
_STORAGES_ACCEPTED = ("an Optuna storage: sqlite:///results/s/study.db, postgresql://user:pass@host:5432/db "
                      "or journal:///shared/folder/study.log")


class StorageUnreadable(InputError):
    """The storage URL the command line names cannot be opened: a journal path without a file
    name or whose folder is missing, a driver not installed, a host that does not answer, a
    scheme Optuna does not know (raised by :func:`tuner.study.open_study`; exit 2).

    ``shown``: the URL with its password hidden; ``why``: the first line of the driver's or
    Optuna's message, with what to do when it is known; ``key``: the flag that named the URL
    (``--storage``, or ``compare``'s ``--storage-b``: :meth:`for_key`)."""

    def __init__(self, shown: str, why: str, key: str = "--storage") -> None:
        super().__init__("(command line)", key, shown, _STORAGES_ACCEPTED, why)

    def for_key(self, key: str) -> StorageUnreadable:
        """The same error naming the flag ``key`` instead."""
        return StorageUnreadable(self.value if isinstance(self.value, str) else "", self.why, key)


class NewerFormat(InputError):
    """The study was stored by a newer nccl-tune (its ``format_version`` above
    :data:`tuner.record.FORMAT_VERSION`, or unreadable): no command of this one reads or
    resumes it (raised by :func:`tuner.study.check_format`; exit 2)."""


class ResumeRefused(InputError):
    """A resume would mix conditions: the config's fingerprint (server command, fixed
    environment, NCCL version, ...), the search space's variables or ``probe.metric`` differ from
    what the study began with (raised by :mod:`tuner.study.resume`'s checks; exit 2). The message
    names each change and the way out (a new ``--study``)."""


# -- the machine and the sweep ---------------------------------------------------------------

class LauncherRefused(InputError):
    """The command's launcher cannot pass the set into the server (``docker run -d``, ``docker
    compose``, ``env -i``): refused before the first launch, naming the flag to change
    (:meth:`tuner.launchers.Launcher.refusal`; raised by :func:`tuner.server.preflight.check`;
    exit 2)."""


class MachineNotClean(NcclTuneError):
    """The sweep cannot go on safely: port held by a stranger, processes survived a teardown,
    GPU memory not released, another runner of the same study alive. What was recorded stays."""

    exit_code = ExitCode.MACHINE_NOT_CLEAN


class PortBusy(MachineNotClean):
    """``host:port`` could not be bound within the wait; ``holder`` says who holds it."""

    def __init__(self, host: str, port: int, waited_s: float, holder: str) -> None:
        self.host, self.port, self.waited_s, self.holder = host, port, waited_s, holder
        super().__init__(f"port {port} on {host} could not be bound after {waited_s:.0f} s: {holder}; "
                         "stop whatever holds it or choose another server.port")


class ForeignListener(MachineNotClean):
    """The listener on ``server.port`` is not the server nccl-tune launched (another user's
    server, a production server a supervisor restarted): what answers there is not the trial's,
    so nothing is recorded for it and the sweep stops (exit 3, ``MACHINE_NOT_CLEAN``).

    ``port``: the port; ``holder``: who listens ("pid 4242 (python3: python3 -m http.server
    8000)", or "a socket of uid 1001" when the system hides the pid); ``launched``: the pid
    nccl-tune launched (None before the spawn); ``when``: the check that saw it ("at
    readiness", "before the recorded runs", "after teardown")."""

    def __init__(self, port: int, holder: str, launched: int | None, when: str) -> None:
        self.port, self.holder, self.launched, self.when = port, holder, launched, when
        ours = f"the server nccl-tune launched (pid {launched})" if launched else "the server nccl-tune launched"
        super().__init__(f"port {port} is listened on by {holder}, not by {ours} ({when}): its answers are not "
                         "this trial's, so nothing was recorded as measured for it. Stop that server or choose "
                         "another server.port; a resume retries the trial")


class GpusInUse(MachineNotClean):
    """This worker's GPUs are in use: by a live nccl-tune worker on this host (any study, any
    storage; ``worker`` True) or, where NVML lists it, by a compute process that is not this
    worker's (``worker`` False). Raised before anything is launched or written (exit 3,
    ``MACHINE_NOT_CLEAN``): two servers on one GPU slow each other down, and both studies would
    record the slowdown as the sets' effect.

    ``mine``: this worker's GPUs in words (``CUDA_VISIBLE_DEVICES=0,1 from server.env``);
    ``holder``: the other worker(s) or process(es) in words, pid, study, config, port, GPUs and
    start time (:meth:`tuner.study.workers.Worker.describe`); ``pids``: theirs."""

    def __init__(self, mine: str, holder: str, pids: list[int], *, worker: bool) -> None:
        self.mine, self.holder, self.pids, self.worker = mine, holder, pids, worker
        kill = " ".join(map(str, pids))
        many = len(pids) > 1
        if worker:
            whose = "live nccl-tune workers" if many else "a live nccl-tune worker"
            text = (f"this worker's GPUs ({mine}) overlap those of {whose} on this host: {holder}. Two servers on one GPU slow each other down and "
                    "both studies would take that for the sets' effect, so nothing was launched. Give this worker "
                    f"GPUs {'the others do' if many else 'the other does'} not use (CUDA_VISIBLE_DEVICES in server.env "
                    f"or in its environment; unset means every GPU), or stop the other worker{'s' if many else ''} "
                    f"(kill {kill}: {'each' if many else 'it'} tears its server down, and the same command resumes "
                    "its study)")
        else:
            text = (f"this worker's GPUs ({mine}) already run {'compute processes' if many else 'a compute process'} "
                    f"that {'are' if many else 'is'} not this worker's: {holder}. A server beside "
                    f"{'them' if many else 'it'} would be measured at a speed it shares, so nothing was launched. "
                    "Give this worker other GPUs (CUDA_VISIBLE_DEVICES in server.env or in its environment), or "
                    f"stop {'those processes' if many else 'that process'} (pid {kill})")
        super().__init__(text)


class BaselineFailed(NcclTuneError):
    """The untuned baseline failed: nothing could be compared, so no tuned set is launched."""

    exit_code = ExitCode.BASELINE_FAILED


class StoppedByCheck(NcclTuneError):
    """A check (NCCL not on the decode path, a bound below the noise) stopped the sweep
    before relaunches were spent; ``--force`` overrides it."""

    exit_code = ExitCode.STOPPED_BY_CHECK


class NoLongerHolds(NcclTuneError):
    """``nccl-tune check``: the deployed set is no longer significantly faster than the baseline
    on its fresh launches (exit 6, ``NO_LONGER_HOLDS``); the message gives the ratio, its bound
    and the rule."""

    exit_code = ExitCode.NO_LONGER_HOLDS


class NotJudged(NcclTuneError):
    """``nccl-tune check``: the deployed set could not be judged (exit 7, ``NOT_JUDGED``): a
    launch of it or of the baseline failed, NCCL did not apply one of its variables (or the
    server its backend choice), its variables cannot act on this server, or the baseline's launches disagree beyond the launch noise.
    The message names which, with the trial and its server log."""

    exit_code = ExitCode.NOT_JUDGED


class Interrupted(NcclTuneError):
    """SIGHUP, SIGINT or SIGTERM reached the runner; the server was torn down, the study kept.

    ``signum`` is the signal; ``exit_code`` is 128 + signum (129, 130, 143).
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = ExitCode(128 + signum)  # one per signal, unlike the other classes
        super().__init__(signal.Signals(signum).name)


class TrialFailed(NcclTuneError):
    """One relaunch gave no measurable run; the sweep records it and goes on.

    ``status`` is a :class:`tuner.record.trial.Status` value (crashed, timeout, hung, unhealthy,
    invalid_output, ...); ``cause`` is one line from the log tail or the probe.
    """

    def __init__(self, status: str, cause: str) -> None:
        super().__init__(f"{status}: {cause}")
        self.status, self.cause = status, cause


class MachineFault(TrialFailed):
    """A launch failed in a way that is not plainly the set's (machine-suspect: an address in
    use, a start-up memory guard, a busy device, ...; ``tuner.server.machine``): status
    ``machine_fault`` (``tuner.record.trial.Status.MACHINE_FAULT``). The sweep relaunches the same
    set once after the machine recovers, then the baseline; the set is blamed only when the
    baseline runs, and the sampler is never told a machine's failure. ``port`` is the port
    involved, when known; ``timed``: a condition that passes with time (a memory guard while the
    driver frees the last server's memory, a busy device, a container name still in use), whose
    waits the sweep learns."""

    def __init__(self, cause: str, port: int | None = None, *, timed: bool = False) -> None:
        super().__init__("machine_fault", cause)
        self.port = port
        self.timed = timed


class MachineFailed(NcclTuneError):
    """Launches failed in a way that is not a set's (:class:`MachineFault`, retried once) and the
    untuned baseline failed too: the machine's, not any set's. The night stops, every record
    kept (the faulted trial as ``machine_fault``, never told to the sampler as the set's); the
    same command resumes it. The message says what was seen."""

    exit_code = ExitCode.MACHINE_FAULT


class ServerListensElsewhere(TrialFailed):
    """The server's log announces another port than ``server.port`` (a command without
    ``{port}``, or a port flag overriding it): stopped at once instead of waiting
    ``ready_timeout_s``. Status ``crashed``; ``port`` is the announced port, ``configured`` the
    expected one."""

    def __init__(self, port: int, configured: int, line: str) -> None:
        self.port, self.configured, self.line = port, configured, line
        super().__init__("crashed", f"the server listens on port {port}, but server.port is {configured} "
                                    f"(log: {line.strip()[:160]}); put {{port}} in server.command")


# -- the probe -------------------------------------------------------------------------------

class ProbeError(NcclTuneError):
    """A probe or bench request failed or produced nothing measurable (exit 1)."""


class ProbeHTTPError(ProbeError):
    """The server answered with HTTP status >= 400. ``status`` (int), ``body_excerpt`` (str),
    ``hint`` (str, what to do about it, e.g. the completions endpoint for a model without a
    chat template; ``""`` when there is nothing to suggest)."""

    def __init__(self, status: int, body_excerpt: str, hint: str = "") -> None:
        self.status = status
        self.body_excerpt = body_excerpt
        self.hint = hint
        text = f"HTTP {status}: {body_excerpt}" if body_excerpt else f"HTTP {status}"
        super().__init__(f"{text} ({hint})" if hint else text)


class ProbeStalled(ProbeError):
    """No token arrived for ``timeout_s`` seconds."""

    def __init__(self, message: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(message)


class ProbeNoAnswer(ProbeStalled):
    """The request got no response headers (not even a status line) for ``timeout_s`` seconds:
    a server still warming up behind an open socket (SGLang's warm-up gate holds every POST,
    sgl-project/sglang #33719), or a hung one. Before readiness is proven the launch waits on
    it while the server logs (:func:`tuner.server.readiness.wait_ready`); after, it is a stall."""


class ProbeFirstTokenLate(ProbeStalled):
    """The response headers came but no token for ``timeout_s`` seconds: before a launch's first
    token, while the server logs a warm-up its kind knows (a kernel compile, a CUDA-graph
    capture: sgl-project/sglang #5031, NVIDIA/TensorRT-LLM #9276), it is waited on
    (:func:`tuner.server.readiness.wait_ready`); otherwise a stall."""


class ProbeDisconnected(ProbeError):
    """The connection closed or reset before the stream finished."""


class ProbeConnectError(ProbeError):
    """Could not connect to the server (refused, unreachable, connect timeout)."""


class ProbeIncomplete(ProbeError):
    """The stream ended before ``max_tokens`` although ``ignore_eos`` was set (finish_reason
    ``abort`` or ``stop``, or usage counting fewer tokens): the run did not make what was asked,
    so its tok/s is not comparable. The message says what ended it."""


@contextmanager
def tolerated() -> Iterator[None]:
    """Suppress any :class:`Exception` the block raises except :class:`Interrupted`.

    The one way nccl-tune ignores a failure it can live with (a missed status write, a display
    error, NVML absent). A signal raises Interrupted in the main thread at whatever line runs, so a
    bare ``except Exception`` there can swallow SIGTERM and the night runs on: seen when SIGTERM
    reached a runner during its phase write to the study. ``tests/unit/architecture/test_signals_pass.py``
    fails on any broad handler in ``tuner/`` that would swallow one.
    """
    try:
        yield
    except Interrupted:
        raise
    except Exception:  # the point: what the caller can live with
        pass

