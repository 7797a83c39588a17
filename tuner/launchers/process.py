"""A plain process: the command is the server itself (behind any wrappers), nccl-tune's child
in its own session. Everything is :class:`tuner.launchers.base.Launcher`'s: the set reaches the
server through the environment nccl-tune gives it (:func:`tuner.server.build_env`), teardown is
the process group's and every marked process's (:mod:`tuner.server.teardown`), and its paths and
ports are this host's.
"""

from __future__ import annotations

from tuner.launchers.base import Launcher

__all__ = ["PlainProcess"]


class PlainProcess(Launcher):
    """The server as a plain process (see the module docstring)."""
