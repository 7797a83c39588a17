"""NCCL's network between nodes, for a profile whose server spans nodes (``gpus_per_node`` > 0):
which NET plugin a communicator gets, the lines NCCL logs on the way, and what each cross-node
channel says it runs on. Spellings and rules of NCCL 2.28.9 (tag v2.28.9-1):

* src/plugin/net.cc ``ncclNetInit``: the internal plugins are tried in order, IB then Socket; one
  whose ``init`` fails or that has no device is dropped ("Failed to initialize NET plugin IB"),
  the first that works is "Initialized NET plugin X" and "Assigned NET plugin X to comm";
  src/init.cc then says "Using network X".
* src/transport/net_ib.cc ``ncclIbInitDevices``: ``NCCL_IB_DISABLE`` non-zero returns before
  anything is printed; ``NCCL_IB_HCA`` ("NCCL_IB_HCA set to %s") keeps the ports it names
  (prefix match, ``=`` exact, ``^`` excludes); no port left is "NET/IB : No device found.";
  then "NET/IB : Using [0]dev:port/RoCE ... [RO]; OOB if:ip<0>".
* src/transport/net_ib.cc ``ncclIbGetGidIndex``: ``NCCL_IB_GID_INDEX`` (default -1) names the
  RoCE GID; unset, NCCL walks the GID table and reads each entry's type from
  ``/sys/class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>`` (``ncclIbRoceGetVersionNum``: an
  open failure is "NET/IB: open failed in ncclIbRoceGetVersionNum: %s", ncclSystemError).
* src/transport/net_socket.cc: "NET/Socket : Using [0]if:ip<0>"; src/misc/socket.cc
  ``ncclFindInterfaces``: ``NCCL_SOCKET_IFNAME`` is echoed twice, "set by environment to" (ENV)
  and "set to" (NET), and an interface it does not name is not used.
* src/graph/paths.cc ``ncclTopoCheckGdr``: GDR needs GPU and NIC support, then a path within
  ``NCCL_NET_GDR_LEVEL`` (echoed by ``ncclGetLevel`` as the level's name).
* the channel lines (src/transport/net.cc): ``Channel CC/0 : A[a] -> B[b] [send] via NET/IB/d``
  (``/GDRDMA`` with GDR), ``NET/Socket/0``; d = the channel's NIC (reallogs 04: IB/0, IB/1).

The mechanism the ``roce-*-spark`` profiles play (chosen): the source the issue cites
(timothystewart6/vllm-gb10 PR #24) measured ~24 t/s in an unprivileged container against ~40+
privileged, and sets ``NCCL_IB_GID_INDEX=3``. The profile's container hides the GID types from
sysfs (``ib_gid_auto = False``): NCCL's own GID choice fails, and a set naming the fabric's GID
index (``ib_gid_index``) skips that read. Real NCCL meets the GID when it connects, and a failure
there fails the communicator; the simulator plays the outcome the source measured instead, the
socket class of speed, as the IB plugin failing at init and NET/Socket taking over (one WARN
says why). Any other explicit GID index is played the same way (chosen).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .ncclconst import OLD_P2P_LEVELS, path_types
from .ncclenv import Message, NcclInitError, info, load_int, strtoll_checked, to_int32, warn
from .profiles import Profile

__all__ = ["NetChoice", "check_net", "gdr_level", "net_choice", "qps_per_connection", "qps_us", "via"]


@dataclasses.dataclass(frozen=True)
class NetChoice:
    """The NET plugin a node's communicator uses: ``name`` ``"IB"`` or ``"Socket"``, ``gdr``
    (GPU Direct RDMA on the IB path), ``ndevs`` (NICs the channels spread over), ``messages``
    (NCCL's lines, in log order) and ``fallback`` (why IB was not used: ``""``, ``"disabled"``,
    ``"no-device"`` or ``"gid"``)."""

    name: str
    gdr: bool
    ndevs: int
    messages: tuple[Message, ...]
    fallback: str = ""


def _int_param(raw: dict, name: str, default: int, msgs: list) -> int:
    """``ncclLoadParam`` of a network parameter (:func:`tuner.sim.ncclenv.load_int`); unset
    keeps ``default``."""
    value = load_int(raw, name, msgs, default)
    return default if value is None else value


def gdr_level(raw: dict, version: str, msgs: list | None = None) -> str | None:
    """NCCL_NET_GDR_LEVEL as ``ncclGetLevel`` reads it (src/graph/paths.cc): a path type name
    (strcmp), or a legacy number; None when unset or unknown."""
    text = raw.get("NCCL_NET_GDR_LEVEL")
    if text is None:
        return None
    names = path_types(version)
    level = text if text in names else None
    if level is None and text[:1].isdigit():
        old = max(0, min(to_int32(strtoll_checked(text)[0]), len(OLD_P2P_LEVELS) - 1))
        level = OLD_P2P_LEVELS[old]
    if level is not None and msgs is not None:
        msgs.append(info(f"NCCL_NET_GDR_LEVEL set by environment to {level}"))
    return level


def qps_per_connection(raw: dict) -> int:
    """NCCL_IB_QPS_PER_CONNECTION (src/transport/net_ib.cc, default 1), at least 1."""
    return max(1, _int_param(raw, "NCCL_IB_QPS_PER_CONNECTION", 1, []))


def _ports(profile: Profile, raw: dict, msgs: list) -> list[str]:
    """The profile's ports NCCL_IB_HCA keeps (``matchIfList``: ``dev[:port]`` entries)."""
    ports = [p for p in profile.net_ib_ports.split(",") if p]
    spec = raw.get("NCCL_IB_HCA")
    if spec is None:
        return ports
    msgs.append(info(f"NCCL_IB_HCA set to {spec}", "NET", "ENV"))
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    wanted = [e.split(":") for e in body.split(",") if e]
    if not wanted:
        return ports

    def named(port: str) -> bool:
        dev, num = port.split("/")[0].split(":")
        for entry in wanted:
            hit = dev == entry[0] if exact else dev.startswith(entry[0])
            if hit and (len(entry) < 2 or entry[1] == num):
                return True
        return False

    return [p for p in ports if named(p) != exclude]


def _ip(profile: Profile, node: int) -> str:
    head, _, last = profile.net_first_ip.rpartition(".")
    return f"{head}.{int(last) + node}"


def _interface_ok(profile: Profile, raw: dict, msgs: list | None) -> bool:
    """Whether NCCL_SOCKET_IFNAME (unset: NCCL's own pick) leaves the profile's interface."""
    spec = raw.get("NCCL_SOCKET_IFNAME")
    if spec is None or len(spec) <= 1:
        return True
    if msgs is not None:
        msgs.append(info(f"NCCL_SOCKET_IFNAME set by environment to {spec}", "ENV"))
        msgs.append(info(f"NCCL_SOCKET_IFNAME set to {spec}", "NET"))
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    hit = any(profile.net_if == e if exact else profile.net_if.startswith(e)
              for e in body.split(",") if e)
    return hit != exclude


def check_net(profile: Profile, raw: dict) -> None:
    """Raise NcclInitError where the bootstrap finds no interface (an NCCL_SOCKET_IFNAME that
    names none of the node's: src/bootstrap.cc "No usable listening interface found")."""
    if profile.gpus_per_node and not _interface_ok(profile, raw, None):
        raise NcclInitError([warn("NET/Socket : No usable listening interface found", "bootstrap.cc:108")],
                            "ncclSystemError")


@functools.lru_cache(maxsize=256)
def _choice(profile: Profile, items: tuple, node: int) -> NetChoice:
    raw = dict(items)
    msgs: list[Message] = []
    _interface_ok(profile, raw, msgs)
    ip = f"{profile.net_if}:{_ip(profile, node)}<0>"
    fallback = ""
    if _int_param(raw, "NCCL_IB_DISABLE", 0, []) != 0:  # echoed with the other parameters (ncclenv)
        fallback = "disabled"
    else:
        ports = _ports(profile, raw, msgs)
        if not ports:
            msgs.append(info("NET/IB : No device found.", "INIT", "NET"))
        listed = "".join(f" [{i}]{p}" for i, p in enumerate(ports))
        msgs.append(info(f"NET/IB : Using{listed} [RO]; OOB {ip}", "INIT", "NET"))
        gid = _int_param(raw, "NCCL_IB_GID_INDEX", -1, msgs) if ports else -1
        if not ports:
            fallback = "no-device"
        elif gid < 0 and not profile.ib_gid_auto:
            msgs.append(warn("NET/IB: open failed in ncclIbRoceGetVersionNum: Permission denied",
                             "transport/net_ib.cc:403"))
            fallback = "gid"
        elif gid >= 0 and gid != profile.ib_gid_index:
            fallback = "gid"
    if fallback:
        msgs.append(info("Failed to initialize NET plugin IB", "INIT", "NET"))
        msgs.append(info(f"NET/Socket : Using [0]{ip}", "INIT", "NET"))
        name, ndevs = "Socket", 1
    else:
        name, ndevs = "IB", len(ports)
    msgs += [info(f"Initialized NET plugin {name}", "INIT", "NET"),
             info(f"Assigned NET plugin {name} to comm", "INIT", "NET"),
             info(f"Using network {name}", "INIT")]
    level = gdr_level(raw, profile.nccl_version, msgs)
    names = path_types(profile.nccl_version)
    # chosen: a GDR-capable NIC sits at PIX from its GPU, within NCCL's default PXB
    gdr = name == "IB" and profile.net_gdr and names.index(level or "PXB") >= names.index("PIX")
    if name == "IB":
        _int_param(raw, "NCCL_IB_QPS_PER_CONNECTION", 1, msgs)
    return NetChoice(name, gdr, ndevs, tuple(msgs), fallback)


def net_choice(profile: Profile, raw: dict, node: int = 0) -> NetChoice:
    """What node ``node``'s NCCL picks from the NCCL_* variables ``raw`` (see the module
    docstring); its addresses are the profile's first IP + node."""
    keep = {k: v for k, v in raw.items() if k.startswith("NCCL_")}
    return _choice(profile, tuple(sorted(keep.items())), node)


def via(choice: NetChoice, channel: int) -> str:
    """The transport a cross-node channel line names: ``NET/IB/1``, ``NET/IB/0/GDRDMA``,
    ``NET/Socket/0``."""
    return f"NET/{choice.name}/{channel % max(1, choice.ndevs)}" + ("/GDRDMA" if choice.gdr else "")


def qps_us(profile: Profile, raw: dict) -> float:
    """The profile's per-allreduce change for NCCL_IB_QPS_PER_CONNECTION (us, on IB only)."""
    return profile.ib_qps_us * math.log2(qps_per_connection(raw))
