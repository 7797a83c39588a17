"""What NCCL does, by version: how it reads each variable, what a set lets it choose, its log lines.

The leaves, lowest first:

* :mod:`~tuner.nccl.types`: :class:`NcclVersion`, :class:`Topology`, the supported releases;
* :mod:`~tuner.nccl.cnum`: C ``strtoll`` and ``int`` as NCCL parses its integer parameters;
* :mod:`~tuner.nccl.names`: the names NCCL reads by version, hardware selectors, misspellings;
* :mod:`~tuner.nccl.lists`, :mod:`~tuner.nccl.p2p`, :mod:`~tuner.nccl.thresholds`: the grammar
  of NCCL_ALGO/NCCL_PROTO, NCCL_P2P_LEVEL and NCCL_THREAD_THRESHOLDS;
* :mod:`~tuner.nccl.values`: each variable's rules (:func:`check_value`, :func:`canonical_value`,
  :func:`value_warnings`, :func:`accepted`);
* :mod:`~tuner.nccl.choice`: the (algorithm, protocol) pairs NCCL may pick (:func:`allreduce_choices`,
  :func:`infeasible_reason`);
* :mod:`~tuner.nccl.safety`: unsafe and risky values; :mod:`~tuner.nccl.sets`: rules for a whole
  set (:func:`cross_problems`, :func:`canonical_set`);
* :mod:`~tuner.nccl.decode`: which variables can act at the decode size;
* :mod:`~tuner.nccl.lines`: NCCL's line prefix and the wrappers before it (:data:`NCCL_LINE`);
  :mod:`~tuner.nccl.tuning`: the TUNING table; :mod:`~tuner.nccl.log`: :func:`parse_log`;
  :mod:`~tuner.nccl.rejoin`: lines a pipe cut, rejoined; :mod:`~tuner.nccl.files`: NCCL_DEBUG_FILE
  patterns and the files a run left; :mod:`~tuner.nccl.sources`: files first, then the server log
  (:func:`read_sources`); :mod:`~tuner.nccl.proof`: :func:`confirmations` of what a trial
  launched, rank by rank.
"""

from tuner.nccl.choice import SERVER_COLLECTIVES, Choices, allreduce_choices, infeasible_reason, ll128_auto
from tuner.nccl.cnum import C_SPACE, INT32_MAX, INT64_MAX, as_c_int, read_int_param, strtoll, strtoll_erange
from tuner.nccl.decode import (
    TREE_ALL_THREADS_FROM,
    WARP_SIZE,
    DecodeChoice,
    DecodeEffect,
    Launch,
    comm_channels,
    decode_effect,
    launch,
    max_threads,
    nccl_name,
    thread_threshold,
)
from tuner.nccl.files import (
    DEBUG_FILE_VAR,
    TRIAL_PATTERN,
    DebugFile,
    debug_file_warnings,
    expand_debug_file,
    find_debug_files,
    has_pid,
    host_name,
)
from tuner.nccl.lines import (
    NCCL_LINE,
    NCCL_MARK,
    NCCL_VERSION,
    RAY_COPIED_ENV,
    SERVER_NCCL_VERSION,
    VLLM_VERSION,
    NcclLine,
    line_pid,
    read_line,
    strip_ansi,
    strip_wrappers,
    version_in_text,
)
from tuner.nccl.lists import (
    ALGO_SINCE,
    FUNCS,
    PER_COLLECTIVE_SINCE,
    PROTOS,
    ListReading,
    Matrix,
    algos,
    canonical_text,
    default_matrix,
    elements,
    read_list,
)
from tuner.nccl.log import (
    SERVER_LOG,
    Fold,
    LogSource,
    Operation,
    ParsedLog,
    decode_choice,
    parse_log,
    parse_sources,
    topology_from_log,
)
from tuner.nccl.names import (
    HARDWARE_SELECTORS,
    KNOWN_NAMES,
    OWN_PREFIX,
    TUNING_NAMES,
    TUNING_PREFIXES,
    closest_name,
    is_hardware_selector,
    is_tuning_variable,
    name_problem,
    name_warning,
    read_by,
)
from tuner.nccl.p2p import p2p_levels, read_p2p_level
from tuner.nccl.proof import (
    P2P_DISABLE_ECHO_FROM,
    RAY_COPIES_NCCL_FROM,
    Confirmations,
    ProofRow,
    confirmations,
    rank_list,
    unlaunched_echoes,
)
from tuner.nccl.rejoin import LINE_STARTS, MAX_PENDING, CutLine, Rejoined, rejoin
from tuner.nccl.safety import risky_reason, unsafe_reason, unsafe_set_reason
from tuner.nccl.sets import canonical_set, cross_problems, cross_warnings
from tuner.nccl.sources import read_sources, server_log_source
from tuner.nccl.thresholds import default_thread_thresholds, read_thread_thresholds
from tuner.nccl.tuning import TuningTable, TuningTableReader
from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, Link, NcclVersion, Topology, judged_version
from tuner.nccl.values import (
    CTAS_LOW_IGNORED_FROM,
    CUDA_DEFAULT_CONNECTIONS,
    CUMEM_AUTO_FROM,
    DEBUG_LEVELS,
    DEFAULT_BUFFSIZE,
    MAX_CHANNELS_FROM,
    NCCL_STEPS,
    RULED_NAMES,
    accepted,
    canonical_value,
    check_value,
    max_channels,
    value_warnings,
)

__all__ = [
    "ALGO_SINCE",
    "CTAS_LOW_IGNORED_FROM",
    "CUDA_DEFAULT_CONNECTIONS",
    "CUMEM_AUTO_FROM",
    "C_SPACE",
    "DEBUG_FILE_VAR",
    "DEBUG_LEVELS",
    "DEFAULT_BUFFSIZE",
    "FUNCS",
    "HARDWARE_SELECTORS",
    "INT32_MAX",
    "INT64_MAX",
    "KNOWN_NAMES",
    "LINE_STARTS",
    "MAX_CHANNELS_FROM",
    "MAX_PENDING",
    "NCCL_LINE",
    "NCCL_MARK",
    "NCCL_STEPS",
    "NCCL_VERSION",
    "NEWEST_VERIFIED",
    "OLDEST_SUPPORTED",
    "OWN_PREFIX",
    "P2P_DISABLE_ECHO_FROM",
    "PER_COLLECTIVE_SINCE",
    "PROTOS",
    "RAY_COPIED_ENV",
    "RAY_COPIES_NCCL_FROM",
    "RULED_NAMES",
    "SERVER_COLLECTIVES",
    "SERVER_LOG",
    "SERVER_NCCL_VERSION",
    "TREE_ALL_THREADS_FROM",
    "TRIAL_PATTERN",
    "TUNING_NAMES",
    "TUNING_PREFIXES",
    "VLLM_VERSION",
    "WARP_SIZE",
    "Choices",
    "Confirmations",
    "CutLine",
    "DebugFile",
    "DecodeChoice",
    "DecodeEffect",
    "Fold",
    "Launch",
    "Link",
    "ListReading",
    "LogSource",
    "Matrix",
    "NcclLine",
    "NcclVersion",
    "Operation",
    "ParsedLog",
    "ProofRow",
    "Rejoined",
    "Topology",
    "TuningTable",
    "TuningTableReader",
    "accepted",
    "algos",
    "allreduce_choices",
    "as_c_int",
    "canonical_set",
    "canonical_text",
    "canonical_value",
    "check_value",
    "closest_name",
    "comm_channels",
    "confirmations",
    "cross_problems",
    "cross_warnings",
    "debug_file_warnings",
    "decode_choice",
    "decode_effect",
    "default_matrix",
    "default_thread_thresholds",
    "elements",
    "expand_debug_file",
    "find_debug_files",
    "has_pid",
    "host_name",
    "infeasible_reason",
    "is_hardware_selector",
    "is_tuning_variable",
    "judged_version",
    "launch",
    "line_pid",
    "ll128_auto",
    "max_channels",
    "max_threads",
    "name_problem",
    "name_warning",
    "nccl_name",
    "p2p_levels",
    "parse_log",
    "parse_sources",
    "rank_list",
    "read_by",
    "read_int_param",
    "read_line",
    "read_list",
    "read_p2p_level",
    "read_sources",
    "read_thread_thresholds",
    "rejoin",
    "risky_reason",
    "server_log_source",
    "strip_ansi",
    "strip_wrappers",
    "strtoll",
    "strtoll_erange",
    "thread_threshold",
    "topology_from_log",
    "unlaunched_echoes",
    "unsafe_reason",
    "unsafe_set_reason",
    "value_warnings",
    "version_in_text",
]
