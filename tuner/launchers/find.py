"""Which launcher a command uses: the program after any wrappers (``env``, ``sudo -E``,
``nice`` ...): docker, podman or nerdctl (:mod:`tuner.launchers.container`), srun
(:mod:`tuner.launchers.slurm`), ``kubectl port-forward`` (:mod:`tuner.launchers.lws`), else a plain process (:mod:`tuner.launchers.process`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tuner.launchers.base import Launcher, skip_wrappers
from tuner.launchers.container import Container, is_container
from tuner.launchers.lws import LwsLauncher, is_port_forward
from tuner.launchers.process import PlainProcess
from tuner.launchers.slurm import SlurmStep, is_srun

__all__ = ["launcher_of"]


def launcher_of(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Launcher:
    """The launcher of ``argv`` (the command as launched, placeholders filled); ``environ``: the
    environment the command starts with, where a launcher reads its own settings (srun's
    ``SLURM_EXPORT_ENV``; default ``os.environ``). A new one per launch: it remembers what
    :meth:`~tuner.launchers.base.Launcher.prepare` added."""
    wrappers = skip_wrappers(argv)
    if is_container(argv, wrappers.start):
        return Container(argv, wrappers)
    if is_port_forward(argv, wrappers.start):
        return LwsLauncher(argv, wrappers)
    if is_srun(argv, wrappers.start):
        return SlurmStep(argv, wrappers, environ)
    return PlainProcess(argv, wrappers)
