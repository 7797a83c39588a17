"""What NCCL does, by version: how it reads each variable, what a set lets it choose, its log lines.

The leaves, lowest first:

* :mod:`~tuner.nccl.types`: :class:`NcclVersion`, :class:`Topology`, the supported releases;
* :mod:`~tuner.nccl.cnum`: C ``strtoll`` and ``int`` as NCCL parses its integer parameters;
* :mod:`~tuner.nccl.variables`: one record per variable (:data:`VARIABLES`), the one table the
  names, values, proof, decode rule and the report's labels read;
* :mod:`~tuner.nccl.names`: the names NCCL reads by version, hardware selectors, misspellings;
* :mod:`~tuner.nccl.releases`: release facts a backend choice depends on (symmetric kernels);
* :mod:`~tuner.nccl.lists`, :mod:`~tuner.nccl.p2p`, :mod:`~tuner.nccl.thresholds`: the grammar
  of NCCL_ALGO/NCCL_PROTO, NCCL_P2P_LEVEL and NCCL_THREAD_THRESHOLDS;
* :mod:`~tuner.nccl.values`: each variable's rules (:func:`check_value`, :func:`canonical_value`,
  :func:`value_warnings`, :func:`accepted`);
* :mod:`~tuner.nccl.choice`: the (algorithm, protocol) pairs NCCL may pick (:func:`~tuner.nccl.choice.allreduce_choices`,
  :func:`infeasible_reason`);
* :mod:`~tuner.nccl.safety`: unsafe and risky values; :mod:`~tuner.nccl.sets`: rules for a whole
  set (:func:`cross_problems`, :func:`canonical_set`);
* :mod:`~tuner.nccl.decode`: which variables can act at the decode size;
  :mod:`~tuner.nccl.costmodel`: NCCL's own AllReduce cost model (:func:`allreduce_table`,
  :func:`nccl_pick`);
* :mod:`~tuner.nccl.lines`: NCCL's line prefix and the launchers' and wrappers' prefixes before it
  (:data:`NCCL_LINE`, :func:`strip_launcher`);
  :mod:`~tuner.nccl.benign`: the WARNs NCCL prints and goes on, by version (:func:`benign_warn`);
  :mod:`~tuner.nccl.tuning`: the TUNING table; :mod:`~tuner.nccl.log`: :func:`parse_log`;
  :mod:`~tuner.nccl.rejoin`: lines a pipe cut, rejoined; :mod:`~tuner.nccl.files`: NCCL_DEBUG_FILE
  patterns and the files a run left; :mod:`~tuner.nccl.sources`: files first, then the server log
  (:func:`read_sources`); :mod:`~tuner.nccl.proof`: :func:`confirmations` of what a trial
  launched, rank by rank; :mod:`~tuner.nccl.machine`: NCCL's model of the machine
  (:func:`machine_from_log`); :mod:`~tuner.nccl.netlog`: the network across nodes from its NET
  lines (:func:`read_network`: devices per host, transport per cross-node pair); :mod:`~tuner.nccl.xmlfiles`: the topology and graph XML files
  NCCL_TOPO_FILE/NCCL_GRAPH_FILE name (:func:`read_xml_file`);
* :mod:`~tuner.nccl.conf`: the settings NCCL takes besides its environment (conf files, plugins:
  :func:`conf_files`, :func:`parse_conf`, :func:`plugin_sources`); :mod:`~tuner.nccl.library`: the
  library file, its version and GNU build ID (:func:`build_id`); :mod:`~tuner.nccl.diagnostics`:
  NCCL's init diagnostics (2.31+: :func:`diagnostics_env`, :func:`read_diag`).
"""

from tuner.nccl.benign import benign_warn
from tuner.nccl.choice import infeasible_reason
from tuner.nccl.cnum import strtoll
from tuner.nccl.conf import SettingsSource, conf_files, origin_of, plugin_sources, read_conf
from tuner.nccl.costmodel import CostTable, ModelGraph, Pick, allreduce_table, nccl_pick
from tuner.nccl.decode import DecodeChoice, comm_channels, decode_effect, launch
from tuner.nccl.diagnostics import DIAGNOSTICS_VAR, DiagResult, diagnostics_env, read_diag
from tuner.nccl.files import DEBUG_FILE_VAR, TRIAL_PATTERN, DebugFile, debug_file_warnings, find_debug_files, has_pid
from tuner.nccl.library import NEVER_LOADED, LoadedLibrary, build_id, is_nccl_library, library_version
from tuner.nccl.lines import NCCL_LINE, NCCL_MARK, line_pid, strip_launcher, version_in_text
from tuner.nccl.log import LogSource, Operation, ParsedLog, parse_log, parse_sources, topology_from_log
from tuner.nccl.machine import NcclMachine, machine_from_log
from tuner.nccl.names import (
    HARDWARE_SELECTORS,
    OWN_PREFIX,
    is_hardware_selector,
    is_tuning_variable,
    name_warning,
)
from tuner.nccl.netlog import CrossPair, NetworkView, read_network
from tuner.nccl.p2p import CPU_KINDS, default_p2p_level, p2p_levels
from tuner.nccl.proof import SilentWhy, confirmations, node_ranks, unlaunched_echoes
from tuner.nccl.releases import symmetric_kernels_reason
from tuner.nccl.safety import risky_reason, unsafe_reason, unsafe_set_reason
from tuner.nccl.sets import (
    canonical_set,
    cross_problems,
    cross_warnings,
    local_gpus,
    version_doubts,
    version_problems,
)
from tuner.nccl.sources import read_sources, server_log_source
from tuner.nccl.tuning import TuningTable
from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, NcclVersion, Topology
from tuner.nccl.values import accepted, canonical_value, check_value, since_text, value_since, value_warnings
from tuner.nccl.variables import VARIABLES
from tuner.nccl.xmlfiles import FILE_VARS, GRAPH_FILE_VAR, TOPO_FILE_VAR, read_xml_file

__all__ = [
    "CPU_KINDS",
    "DEBUG_FILE_VAR",
    "DIAGNOSTICS_VAR",
    "FILE_VARS",
    "GRAPH_FILE_VAR",
    "HARDWARE_SELECTORS",
    "NCCL_LINE",
    "NCCL_MARK",
    "NEVER_LOADED",
    "NEWEST_VERIFIED",
    "OLDEST_SUPPORTED",
    "OWN_PREFIX",
    "TOPO_FILE_VAR",
    "TRIAL_PATTERN",
    "VARIABLES",
    "CostTable",
    "CrossPair",
    "DebugFile",
    "DecodeChoice",
    "DiagResult",
    "LoadedLibrary",
    "LogSource",
    "ModelGraph",
    "NcclMachine",
    "NcclVersion",
    "NetworkView",
    "Operation",
    "ParsedLog",
    "Pick",
    "SettingsSource",
    "SilentWhy",
    "Topology",
    "TuningTable",
    "accepted",
    "allreduce_table",
    "benign_warn",
    "build_id",
    "canonical_set",
    "canonical_value",
    "check_value",
    "comm_channels",
    "conf_files",
    "confirmations",
    "cross_problems",
    "cross_warnings",
    "debug_file_warnings",
    "decode_effect",
    "default_p2p_level",
    "diagnostics_env",
    "find_debug_files",
    "has_pid",
    "infeasible_reason",
    "is_hardware_selector",
    "is_nccl_library",
    "is_tuning_variable",
    "launch",
    "library_version",
    "line_pid",
    "local_gpus",
    "machine_from_log",
    "name_warning",
    "nccl_pick",
    "node_ranks",
    "origin_of",
    "p2p_levels",
    "parse_log",
    "parse_sources",
    "plugin_sources",
    "read_conf",
    "read_diag",
    "read_network",
    "read_sources",
    "read_xml_file",
    "risky_reason",
    "server_log_source",
    "since_text",
    "strip_launcher",
    "strtoll",
    "symmetric_kernels_reason",
    "topology_from_log",
    "unlaunched_echoes",
    "unsafe_reason",
    "unsafe_set_reason",
    "value_since",
    "value_warnings",
    "version_doubts",
    "version_in_text",
    "version_problems",
]
