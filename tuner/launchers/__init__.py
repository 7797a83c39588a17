"""One home per launcher: how the server's command starts it, and everything that differs with
it. A launcher owns how the set reaches the server (``prepare``: the argv to launch; ``plan``:
that in words; ``refusal``: where it cannot, before the first launch), its teardown after the
launched command is gone (``stop``, and what it leaves behind, in words), which paths and ports
are the host's (``host_path``, ``host_ports``, ``server_argv``) and who holds the listener
(``listener_outside``).

The leaves: :mod:`~tuner.launchers.base` (the launcher every other one is, and the wrappers in
front of it), :mod:`~tuner.launchers.process` (a plain process),
:mod:`~tuner.launchers.container` (``docker run``, ``podman run``),
:mod:`~tuner.launchers.slurm` (``srun``), :mod:`~tuner.launchers.multiprog` (one ``srun
--multi-prog`` step for a server spanning nodes), :mod:`~tuner.launchers.lws` (a LeaderWorkerSet
per trial), :mod:`~tuner.launchers.find` (:func:`launcher_of`).
"""

from tuner.launchers.base import Launcher, Stopped, run_quiet
from tuner.launchers.find import launcher_of
from tuner.launchers.lws import lws_manifest, lws_name, manifest_path, pod_names, wait_running
from tuner.launchers.multiprog import allocation_hosts, multiprog_text, split_label, srun_argv

__all__ = ["Launcher", "Stopped", "allocation_hosts", "launcher_of", "lws_manifest", "lws_name", "manifest_path",
           "multiprog_text", "pod_names", "run_quiet", "split_label", "srun_argv", "wait_running"]
