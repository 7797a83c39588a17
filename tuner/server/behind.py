"""NCCL settings the server will see that nccl-tune does not set: named before the first launch
(the sweep's log and ``--dry-run``), and where each echo of an unlaunched variable came from.

The sources (:mod:`tuner.nccl.conf`): for a plain process (or a Slurm step), the conf files NCCL
reads under the launch environment (``NCCL_CONF_FILE``, the server user's ``~/.nccl.conf``,
``/etc/nccl.conf``) and the plugin variables of that environment (an ``libnccl-env.so`` on its
``LD_LIBRARY_PATH`` too); for a container, the image's own environment
(:meth:`tuner.launchers.Launcher.image_env`) and the plugin variables of image and launch: the
conf files inside the image are not looked at (they are the image's, not this host's).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Collection, Mapping, Sequence

from tuner.inputs import ServerConfig
from tuner.launchers import launcher_of
from tuner.nccl import SettingsSource, conf_files, plugin_sources, read_conf
from tuner.redaction import redact
from tuner.server.env import build_env

__all__ = ["behind_lines", "settings_behind"]


def _homes(env: Mapping[str, str]) -> list[str]:
    """The server user's home as NCCL finds it (the password database: this runner's user, whom
    a plain launch runs as), then the launch environment's ``HOME`` where it differs."""
    try:
        homes = [pwd.getpwuid(os.getuid()).pw_dir]
    except KeyError:
        homes = []
    return [*homes, env["HOME"]] if env.get("HOME") else homes


def settings_behind(server: ServerConfig, environ: Mapping[str, str] | None = None,
                    varied: Collection[str] = ()) -> list[SettingsSource]:
    """Every source of NCCL settings the server will see that nccl-tune did not set, in NCCL's
    order (the module docstring) for the server ``server``; ``environ``: the runner's (default ``os.environ``), from which
    the launch environment is made as every launch makes it (:func:`tuner.server.build_env`,
    ``varied`` the space's names). A conf file that does not exist, or sets nothing, is not listed;
    one that cannot be read is, with why. Runs the container client once for a container."""
    env, _removed = build_env(dict(os.environ if environ is None else environ), server.env, {}, varied)
    launcher = launcher_of(server.argv())
    image, what = launcher.image_env()
    out: list[SettingsSource] = []
    if image is None and not what:
        for how, path in conf_files(env, _homes(env)):
            values, why = read_conf(path)
            if values or why:
                shown = how if how.startswith("NCCL_CONF_FILE") else str(path)
                note = "; ".join(w for w in (why, how if how.startswith("$HOME") else "") if w)
                out.append(SettingsSource(shown, redact(values or {}), note))  # a file may set any name
        return out + plugin_sources(env)
    if image is None:
        return [SettingsSource(what)]
    nccl = {k: v for k, v in image.items() if k.startswith("NCCL_")}
    if nccl:
        out.append(SettingsSource(what, redact(nccl)))
    inside = {**image, **{k: v for k, v in server.env.items()}}
    return out + plugin_sources(inside)


def behind_lines(sources: Sequence[SettingsSource], varied: Collection[str], fixed: Collection[str] = ()) -> list[str]:
    """What the night says of ``sources`` before its first launch: one line per source, and a loud
    one per variable a source sets that the space varies (``varied``), since the baseline is then
    not untuned for it; variables ``fixed`` (server.env, the launch's own) win over a conf file
    and are said to. Empty when there is no source."""
    out = [f"NCCL settings nccl-tune does not set: {s.text()}" for s in sources]
    for s in sources:
        for name, value in s.values.items():
            if name in fixed:
                continue
            if name in varied and (s.note.startswith("$HOME") or "; $HOME" in s.note):
                # NCCL takes the home from the password database: $HOME's file may never be read
                out.append(f"WARNING: {s.where} sets {name}={value}, which the search space varies: if NCCL reads "
                           f"it (only where $HOME is the server user's home in the password database), the baseline "
                           f"runs with {name}={value} and is not untuned for {name}; the baseline's own echoes will "
                           "say (trials.csv nccl_unlaunched); remove it there to be sure")
            elif name in varied:
                out.append(f"WARNING: {s.where} sets {name}={value}, which the search space varies: the baseline runs "
                           f"with {name}={value}, so it is not untuned for {name}; remove it there for a night that "
                           "starts from NCCL's defaults")
    return out
