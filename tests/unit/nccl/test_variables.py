"""One record per NCCL variable (tuner/nccl/variables.py): complete, the one table every reader
reads, so a new variable is one entry; what each release changed, each with its source."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from tests.helpers import ROOT
from tuner.nccl import (
    HARDWARE_SELECTORS,
    VARIABLES,
    NcclVersion,
    accepted,
    canonical_value,
    check_value,
    name_warning,
    symmetric_kernels_reason,
    value_warnings,
)
from tuner.nccl.names import KNOWN_NAMES, closest_name, name_problem, read_by
from tuner.nccl.variables import ACTS, PARSES, Variable
from tuner.report.style import SHORT_NAMES, short_name

V2307 = NcclVersion(2, 30, 7)


def test_every_variable_has_a_parse_rule_versions_and_a_source():
    assert len(VARIABLES) > 250
    for name, var in VARIABLES.items():
        assert var.name == name
        assert var.parse in PARSES, name
        assert var.source.strip() and (var.source.startswith(("src/", "plugins/", "torch/", "CUDA")) or
                                       "src/" in var.source), name
        for version in (var.first, var.last):
            if version:
                NcclVersion.parse(version)  # raises on a bad one
        if var.first and var.last:
            assert NcclVersion.parse(var.first) <= NcclVersion.parse(var.last), name
        assert var.acts_on is None or set(var.acts_on) <= set(ACTS), name
        for fact in var.facts:
            NcclVersion.parse(fact.version)
            assert fact.text and ("src/" in fact.source or "release notes" in fact.source), name
        if var.parse == "enum":
            assert var.values, name
        if var.parse == "level":
            assert var.legacy_levels == ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS"), name


def test_level_variables_are_the_two_ncclgetlevel_reads():
    """src/graph/paths.cc calls ncclGetLevel for NCCL_P2P_LEVEL (with NCCL_P2P_DISABLE) and
    NCCL_NET_GDR_LEVEL only, v2.18.1-1 to v2.30.7-1; NCCL_NET_GDR_READ and NCCL_P2P_PXN_LEVEL are
    plain integers."""
    levels = sorted(n for n, v in VARIABLES.items() if v.parse == "level")
    assert levels == ["NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL"]
    assert VARIABLES["NCCL_NET_GDR_READ"].parse == "int" and VARIABLES["NCCL_P2P_PXN_LEVEL"].parse == "int"
    assert canonical_value("NCCL_NET_GDR_LEVEL", "1") == "PIX"  # echoed as PIX by every rank
    assert canonical_value("NCCL_NET_GDR_LEVEL", "PHB") == "PHB"
    assert "case-sensitive" in check_value("NCCL_NET_GDR_LEVEL", "phb")


def test_the_readers_take_the_record():
    assert frozenset(VARIABLES) == KNOWN_NAMES
    assert set(HARDWARE_SELECTORS) == {n for n, v in VARIABLES.items() if v.hardware}
    assert "NCCL_SOCKET_IFNAME" in HARDWARE_SELECTORS and "NCCL_IB_HCA" in HARDWARE_SELECTORS
    assert list(SHORT_NAMES) == [n for n, v in VARIABLES.items() if v.short]
    assert short_name("NCCL_PROTO") == "PROTO" and short_name("NCCL_IB_HCA") == "IB_HCA"
    assert read_by("NCCL_PAT_ENABLE", NcclVersion(2, 21, 5)) is False
    assert read_by("NCCL_PAT_ENABLE", V2307) is True and read_by("NCCL_NOPE", V2307) is None


def test_one_entry_is_enough_for_a_new_variable(monkeypatch):
    """A variable of a newer NCCL added as one record is known, judged by its parse and echoed
    where its record says, with nothing else to edit."""
    new = Variable("NCCL_FUTURE_KNOB", "int", "src/future.cc, NCCL_PARAM(FutureKnob)", first="2.40.1")
    assert "--allow-unknown" in check_value(new.name, "1")
    monkeypatch.setitem(VARIABLES, new.name, new)
    assert name_problem(new.name) is None and check_value(new.name, "1") is None
    assert "strtoll" in check_value(new.name, "yes") and "strtoll" in accepted(new.name)
    assert canonical_value(new.name, "0x10") == "16"
    assert "does not read NCCL_FUTURE_KNOB" in name_warning(new.name, V2307)
    assert closest_name("NCCL_FUTURE_KNOBS") == new.name


#: Dicts keyed by NCCL names that are not knowledge of the variables: environments to set
#: (every value one NCCL accepts), and these, each owned by its room.
_NOT_TABLES = {
    "SERVER_OVERRIDES": "what a server kind writes into its own environment (tuner/servers)",
    "FIX_VALUES": "the values a triage finding proposes (tuner/triage)",
    "_LOGGING": "the logging variables a launch adds (tuner/diagnose/debug.py DEBUG_ENV's names)",
}


def _target(tree: ast.AST, node: ast.AST) -> str:
    for parent in ast.walk(tree):
        if isinstance(parent, ast.Assign | ast.AnnAssign) and any(n is node for n in ast.walk(parent)):
            target = parent.targets[0] if isinstance(parent, ast.Assign) else parent.target
            return target.id if isinstance(target, ast.Name) else ""
    return ""


def _tables(source: str) -> list[tuple[int, str]]:
    """``(line, target)`` of each dict or set literal holding two or more NCCL names as keys or
    members, other than an environment to launch."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys, values = node.keys, node.values
        elif isinstance(node, ast.Set):
            keys, values = node.elts, []
        else:
            continue
        names = [k.value for k in keys if isinstance(k, ast.Constant) and k.value in VARIABLES]
        if len(names) < 2:
            continue
        env_like = bool(values) and all(
            isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)
            and len(v.value) <= 40 and check_value(str(k.value), v.value) is None for k, v in zip(keys, values, strict=True))
        target = _target(tree, node)
        if not env_like and target not in _NOT_TABLES:
            found.append((node.lineno, target))
    return found


def test_no_other_module_holds_a_table_keyed_by_nccl_names():
    """The six tables of issue 33 (values, names, proof, decode, the report's short names) read
    the record now; the simulator keeps its own NCCL on purpose (it stands in for the real one)."""
    found = []
    for path in sorted((ROOT / "tuner").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "sim" or rel.as_posix() == "tuner/nccl/variables.py":
            continue
        found += [f"{rel}:{line} {target}" for line, target in _tables(path.read_text())]
    assert found == []


def test_the_scan_bites():
    assert _tables('SHORT = {"NCCL_PROTO": "PROTO", "NCCL_ALGO": "ALGO"}\n') == [(1, "SHORT")]
    assert _tables('ECHOED = frozenset({"NCCL_ALGO", "NCCL_PROTO"})\n') == [(1, "ECHOED")]
    assert _tables('ENV = {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL"}\n') == []


def test_the_simulator_reads_only_variables_of_the_record():
    """The simulator stands in for NCCL and never imports the core, so it keeps its own integer
    parameters; they must be the record's integers, or one of the two is wrong."""
    from tuner.sim.ncclenv import INT_PARAMS

    for name in INT_PARAMS:
        assert VARIABLES[name].parse == "int", name


@pytest.mark.parametrize("typo,meant", [
    ("NCCL_PROTOCOL", "NCCL_PROTO"), ("NCCL_PROTOCOLS", "NCCL_PROTO"), ("NCCL_ALGORITHM", "NCCL_ALGO"),
    ("NCCL_ALGOS", "NCCL_ALGO"), ("nccl_proto", "NCCL_PROTO"), ("NCCL-P2P-LEVEL", "NCCL_P2P_LEVEL"),
    ("NCCL_IB_DISABLED", "NCCL_IB_DISABLE"), ("NCCL_SOCKET_IF_NAME", "NCCL_SOCKET_IFNAME"),
    ("NCCL_MAXCHANNELS", "NCCL_MAX_NCHANNELS"), ("NCCL_BUFFER_SIZE", "NCCL_BUFFSIZE"),
    ("NCCL_DEBUG_SUBSYSTEM", "NCCL_DEBUG_SUBSYS"), ("NCCL_NTHREAD", "NCCL_NTHREADS"),
    ("NCCL_CUMEM", "NCCL_CUMEM_ENABLE"), ("CUDA_DEVICE_MAX_CONNECTION", "CUDA_DEVICE_MAX_CONNECTIONS"),
])
def test_did_you_mean(typo, meant):
    assert closest_name(typo) == meant
    assert f"did you mean {meant}?" in name_problem(typo)


def test_names_not_nccls_and_own_settings_pass():
    for name in ("HF_TOKEN", "VLLM_USE_V1", "NCCL_TUNE_HEARTBEAT_S", "OMP_NUM_THREADS"):
        assert name_problem(name) is None and closest_name(name) is None
    assert closest_name("NCCL_ZZZ_QQQ") is None
    assert "did you mean" not in name_problem("NCCL_ZZZ_QQQ") and "--allow-unknown" in name_problem("NCCL_ZZZ_QQQ")


@pytest.mark.parametrize("name,value,says", [
    ("NCCL_IB_DISABLE", "yes", "as 0 (it stops at 'yes'), so IB stays ENABLED"),
    ("NCCL_IB_DISABLE", "true", "so IB stays ENABLED"),
    ("NCCL_P2P_DISABLE", "true", "so P2P stays ENABLED"),
    ("NCCL_SHM_DISABLE", "on", "so SHM stays ENABLED"),
    ("NCCL_NET_GDR_READ", "1 ", None),
    ("NCCL_PXN_DISABLE", "0x1", None),
    ("NCCL_IB_QPS_PER_CONNECTION", "4k", "as 4 (it stops at 'k')"),
    ("NCCL_CROSS_NIC", "", "empty"),
])
def test_integers_are_read_as_strtoll_reads_them(name, value, says):
    why = check_value(name, value)
    if says is None:
        assert why is None
    else:
        assert why is not None and says in why, why


def test_hardware_selectors_are_checked_for_their_name_only():
    assert check_value("NCCL_SOCKET_IFNAME", "^docker,lo") is None
    assert check_value("NCCL_IB_HCA", "=mlx5_0:1") is None
    assert "did you mean NCCL_SOCKET_IFNAME?" in check_value("NCCL_SOCKET_IFNAM", "eth0")


def test_variables_removed_in_2_30_are_refused_for_a_known_newer_target():
    for name in ("NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_SHM_MEMCPY_MODE"):
        var = VARIABLES[name]
        assert var.last == "2.30.4" and any("shm.cc" in f.source for f in var.facts)
        why = check_value(name, "1", V2307)
        assert why is not None and "ignored since NCCL 2.30.7" in why and "as if it were unset" in why
        assert check_value(name, "1", NcclVersion(2, 29, 7)) is None
        assert check_value(name, "1") is None  # version unknown: never refused for it
    assert "does not read" in name_warning("NCCL_SHM_USE_CUDA_MEMCPY", V2307)


def test_the_blackwell_cta_limit_is_in_the_ctas_records():
    for name in ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"):
        facts = VARIABLES[name].facts
        assert any(f.version == "2.28.3" and "32 to 16" in f.text and "v2.28.3-1" in f.source for f in facts)
    assert value_warnings("NCCL_MAX_CTAS", "16", NcclVersion(2, 28, 3)) == []


def test_symmetric_kernels_only_on_all_nvlink_from_2_29():
    assert symmetric_kernels_reason(NcclVersion(2, 28, 9), "pcie") is None
    why = symmetric_kernels_reason(NcclVersion(2, 29, 2), "pcie")
    assert why is not None and "ncclSymkAvailable" in why and "PCIe" in why
    assert symmetric_kernels_reason(NcclVersion(2, 30, 7), "nvlink") is None
    assert symmetric_kernels_reason(None, "pcie") is None and symmetric_kernels_reason(V2307, None) is None
    assert "2.27" in symmetric_kernels_reason(NcclVersion(2, 26, 6), "nvlink")


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        VARIABLES["NCCL_PROTO"].short = "P"  # type: ignore[misc]
