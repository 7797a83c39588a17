"""Where NCCL finds settings besides the environment it is started with: its configuration
files, its env plugin and the plugin libraries a variable names.

NCCL 2.18.1 to 2.30.7 (src/misc/param.cc, ``initEnvFunc``, once per process before its first
``ncclGetEnv``): the file ``$NCCL_CONF_FILE`` names when it is set and not empty, else
``<home>/.nccl.conf`` (the home of the user it runs as, from the password database:
``userHomeDir``, ``getpwuid(getuid())``, not ``$HOME``), then ``/etc/nccl.conf``. ``setEnvFile``
reads each ``NAME=VALUE`` line (a line starting with ``#`` skipped, one without ``=`` skipped,
split at the first ``=``, only the final newline removed: no blank is trimmed) and sets it with
``setenv(NAME, VALUE, 0)``: a value in the environment wins, then the first line that sets a
name (the user's file before ``/etc/nccl.conf``). From 2.28.7 an env plugin (``NCCL_ENV_PLUGIN``,
else ``libnccl-env.so`` where the dynamic loader finds it: src/plugin/plugin_open.cc) answers
every ``ncclGetEnv`` and can set any ``NCCL_*``. Tuner, profiler and net plugins
(``NCCL_TUNER_PLUGIN``, ``NCCL_PROFILER_PLUGIN``, ``NCCL_NET_PLUGIN``) change what NCCL chooses
or how it moves data without any variable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuner.nccl.variables import VARIABLES

__all__ = ["CONF_FILE_VAR", "ENV_PLUGIN_DEFAULT", "SYSTEM_CONF", "SettingsSource", "conf_files", "origin_of",
           "parse_conf", "plugin_sources", "read_conf"]

CONF_FILE_VAR = "NCCL_CONF_FILE"
SYSTEM_CONF = "/etc/nccl.conf"
ENV_PLUGIN_VAR = "NCCL_ENV_PLUGIN"
#: The env plugin NCCL 2.28.7+ opens by name when NCCL_ENV_PLUGIN is not set (src/plugin/plugin_open.cc).
ENV_PLUGIN_DEFAULT = "libnccl-env.so"
#: Plugin variables and what the library they name can do (src/plugin/tuner.cc, profiler.cc, net.cc,
#: env.cc), from the one record per variable.
PLUGIN_VARS = {name: v.plugin for name, v in VARIABLES.items() if v.plugin}
_LINE_MAX = 1023  # setEnvFile's envVar and envValue buffers: char[1024]


@dataclass(frozen=True)
class SettingsSource:
    """One place NCCL takes settings from that the tool did not set: ``where`` in words (a file's
    path and how NCCL finds it, a plugin, an image), ``values`` the ``NCCL_*`` names and values it
    sets (empty for a plugin whose settings are not known before it runs), ``note`` what else to
    know (a plugin's power, a file that could not be read)."""

    where: str
    values: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def text(self) -> str:
        """``"/etc/nccl.conf sets NCCL_P2P_DISABLE=1, NCCL_ALGO=Ring"`` and its note."""
        said = ", ".join(f"{k}={v}" for k, v in self.values.items())
        out = f"{self.where} sets {said}" if said else self.where
        return f"{out} ({self.note})" if self.note else out


def parse_conf(text: str) -> dict[str, str]:
    """The variables a conf file's ``text`` sets, as ``setEnvFile`` reads it (module docstring):
    name -> value, the first line of a name winning (``setenv(..., 0)``); a line ``=x`` (no
    name) sets nothing. Every name is kept (a file may set variables other than NCCL's)."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name, value = name[:_LINE_MAX], value[:_LINE_MAX]
        if name and name not in out:
            out[name] = value
    return out


def read_conf(path: Path) -> tuple[dict[str, str] | None, str]:
    """``(values, why)``: :func:`parse_conf` of the file at ``path``; ``(None, "")`` when it does
    not exist (NCCL skips it without a word), ``(None, why)`` when it exists but cannot be read."""
    try:
        return parse_conf(path.read_bytes().decode("utf-8", errors="replace")), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot be read here: {exc.strerror or exc}"


def conf_files(env: Mapping[str, str], homes: Sequence[str]) -> list[tuple[str, Path]]:
    """``(how NCCL finds it, path)`` of each conf file NCCL would read under the launch
    environment ``env``, in NCCL's order: ``$NCCL_CONF_FILE`` (set and not empty) or each of
    ``homes``' ``.nccl.conf`` (the server user's home from the password database first, then a
    different ``$HOME``: NCCL reads the first only, the second is named in case the server runs as
    the user whose home it is), then ``/etc/nccl.conf``."""
    out: list[tuple[str, Path]] = []
    named = env.get(CONF_FILE_VAR, "")
    if named:
        out.append((f"{CONF_FILE_VAR}={named}", Path(named)))
    else:
        seen: set[str] = set()
        for i, home in enumerate(homes):
            if home and home not in seen:
                seen.add(home)
                how = ("~/.nccl.conf" if i == 0 else "$HOME/.nccl.conf: NCCL reads it where this is the server user's "
                       "home in the password database, src/misc/param.cc userHomeDir")
                out.append((how, Path(home) / ".nccl.conf"))
    out.append(("/etc/nccl.conf", Path(SYSTEM_CONF)))
    return out


def _on_library_path(name: str, env: Mapping[str, str]) -> str | None:
    """The first ``LD_LIBRARY_PATH`` folder of ``env`` holding ``name``, as a path; None if none."""
    for folder in env.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if folder and os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def plugin_sources(env: Mapping[str, str]) -> list[SettingsSource]:
    """The plugin variables ``env`` sets (:data:`PLUGIN_VARS`), and a ``libnccl-env.so`` on its
    ``LD_LIBRARY_PATH`` that NCCL 2.28.7+ opens by default when NCCL_ENV_PLUGIN is not set."""
    out = [SettingsSource(f"{name}={env[name]}", {name: env[name]}, what)
           for name, what in PLUGIN_VARS.items() if env.get(name)]
    if not env.get(ENV_PLUGIN_VAR) and (found := _on_library_path(ENV_PLUGIN_DEFAULT, env)):
        out.append(SettingsSource(f"{found} on LD_LIBRARY_PATH", {}, "NCCL 2.28.7+ opens it by default as its env "
                                  "plugin: it can set any NCCL variable"))
    return out


def origin_of(name: str, sources: Iterable[SettingsSource]) -> str:
    """Where ``name`` came from: the first of ``sources`` (in NCCL's order) that sets it, else
    the env plugins among them (which can set any), else ``""`` (not known)."""
    listed = list(sources)
    found = next((s.where for s in listed if name in s.values), None)
    if found is not None:
        return found
    plugins = [s.where for s in listed if not s.values or ENV_PLUGIN_VAR in s.values]
    return f"perhaps {' or '.join(plugins)}" if plugins else ""
