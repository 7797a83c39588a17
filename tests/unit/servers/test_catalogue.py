"""The catalogue of backend switches: its entries, lookups, feasibility, the backend spaces and
docs/BACKENDS.md held to it."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT
from tuner.errors import InputError
from tuner.inputs import load_space
from tuner.nccl import NcclVersion
from tuner.servers import CATALOGUE, choice_of, infeasible, switch_versions, version_key
from tuner.servers.catalogue import choices, switch_keys
from tuner.servers.entries import MiB

SPACES = {"vllm": ROOT / "search_spaces" / "vllm-backends.toml",
          "sglang": ROOT / "search_spaces" / "sglang-backends.toml"}
DOC = ROOT / "docs" / "BACKENDS.md"
BY_NAME = {c.name: c for c in CATALOGUE}


def table_rows() -> list[str]:
    """docs/BACKENDS.md's table rows, as CATALOGUE says them."""
    rows = []
    for c in CATALOGUE:
        switch = ", ".join(f"`{k}`" if v == "on" else f"`{k}={v}`" for k, v in c.params.items()) or "(default)"
        tp = ", ".join(map(str, c.tp_sizes)) if c.tp_sizes else "any > 1"
        size = f"{c.max_bytes // MiB} MiB" if c.max_bytes else "-"
        proof = "; ".join(f"`{p}`" for p in c.proof) or "(none printed)"
        rows.append(f"| {c.server} | `{c.name}` | {switch} | {c.versions()} | {c.backend} | {tp} | {size} | "
                    f"{', '.join(c.needs) or '-'} | {proof.replace('|', '&#124;')} | {c.source} |")
    return rows


def test_names_are_unique_and_well_formed():
    assert len(BY_NAME) == len(CATALOGUE)
    for c in CATALOGUE:
        assert c.name.startswith(f"{c.server}-") and c.source and "(v" in c.source
        version_key(c.since)
        for pattern in (*c.proof, *c.refusal):
            re.compile(pattern)


def test_the_design_names_that_are_released():
    assert set(BY_NAME) == {
        "vllm-custom-allreduce", "vllm-custom-allreduce-off", "vllm-nccl-only", "vllm-symm-mem",
        "vllm-nccl-symm-mem", "vllm-flashinfer", "vllm-flashinfer-pcie-ipc", "vllm-flashinfer-fusion",
        "sglang-custom-allreduce-off", "sglang-mscclpp", "sglang-torch-symm-mem", "sglang-symm-mem",
        "sglang-flashinfer-fusion", "sglang-pcie-ipc"}


def test_version_key_orders_releases():
    assert version_key("0.5.3.post1") == version_key("0.5.3") < version_key("0.5.10") < version_key("0.11")
    assert version_key("v0.11.0") == version_key("0.11") == (0, 11)
    assert version_key("0.10.1.1") > version_key("0.10.1")
    with pytest.raises(ValueError, match="not a server version"):
        version_key("latest")


def test_choices_by_version():
    at_11 = {c.name for c in choices("vllm", "0.11.0")}
    assert "vllm-nccl-symm-mem" in at_11 and "vllm-flashinfer" not in at_11 and "vllm-nccl-only" not in at_11
    assert "vllm-flashinfer-pcie-ipc" in {c.name for c in choices("vllm", "0.30.0")}
    assert "vllm-flashinfer-pcie-ipc" not in {c.name for c in choices("vllm", "0.29.0")}
    assert {c.name for c in choices("sglang", "0.5.20")} & {"sglang-pcie-ipc"} == set()
    assert len(choices("sglang")) == 6
    assert switch_versions("vllm", "VLLM_ALLREDUCE_USE_FLASHINFER") == ("0.17.0", None)
    assert switch_versions("vllm", "NCCL_PROTO") is None
    assert "--enable-mscclpp" in switch_keys("sglang")


def test_choice_of_names_the_fullest_entry():
    assert choice_of("vllm", {"--disable-custom-all-reduce": "on"}).name == "vllm-custom-allreduce-off"
    full = {"--disable-custom-all-reduce": "on", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
            "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "NCCL_PROTO": "LL"}
    assert choice_of("vllm", full).name == "vllm-nccl-only"
    assert choice_of("vllm", {"NCCL_PROTO": "LL"}) is None
    assert choice_of("vllm", {"--disable-custom-all-reduce": "unset"}) is None
    assert choice_of("sglang", {"--disable-custom-all-reduce": "on"}).name == "sglang-custom-allreduce-off"


def test_infeasible_says_why():
    fi = BY_NAME["vllm-flashinfer"]
    assert "0.11.0 does not have vllm-flashinfer" in infeasible(fi, version="0.11.0", tp=4, link="nvlink")
    assert infeasible(fi, version="0.17.0", tp=4, link="nvlink") is None
    assert "TP sizes 2, 4, 8, not 6" in infeasible(fi, version=None, tp=6, link=None)
    assert "no allreduce" in infeasible(fi, version=None, tp=1, link=None)
    symm = BY_NAME["vllm-symm-mem"]
    assert "needs nvswitch" in infeasible(symm, version="0.11.0", tp=8, link="pcie")
    assert "above the 67108864 bytes" in infeasible(symm, version=None, tp=8, link=None, decode_bytes=65 * MiB)
    ca = BY_NAME["vllm-custom-allreduce"]
    assert infeasible(ca, version=None, tp=2, link="pcie") is None  # two PCIe GPUs are taken
    assert "PCIe" in infeasible(ca, version=None, tp=4, link="pcie")
    assert infeasible(ca, version=None, tp=None, link=None) is None  # unknowns never refuse


@pytest.mark.parametrize("name", ["vllm-nccl-symm-mem", "sglang-symm-mem"])
def test_nccl_symmetric_kernels_cannot_act_on_pcie_from_nccl_2_29(name):
    """NCCL 2.29+ runs its symmetric kernels only when every GPU pair is a direct NVLink
    (src/sym_kernels.cc, ncclSymkAvailable, v2.29.2-1): a switch that routes allreduces to them
    cannot act on a PCIe box there, and can under 2.28."""
    choice = BY_NAME[name]
    why = infeasible(choice, version=None, tp=4, link="pcie", nccl_version=NcclVersion(2, 29, 2))
    assert why is not None and "ncclSymkAvailable" in why and "PCIe" in why
    assert infeasible(choice, version=None, tp=4, link="pcie", nccl_version=NcclVersion(2, 28, 9)) is None
    assert infeasible(choice, version=None, tp=4, link="nvlink", nccl_version=NcclVersion(2, 30, 7)) is None
    assert infeasible(choice, version=None, tp=4, link="pcie") is None  # NCCL version unknown
    assert infeasible(BY_NAME["vllm-custom-allreduce"], version=None, tp=2, link="pcie",
                      nccl_version=NcclVersion(2, 30, 7)) is None  # not NCCL's kernels


@pytest.mark.parametrize("server", ["vllm", "sglang"])
def test_each_backend_space_preset_is_its_catalogue_entry(server):
    space = load_space(SPACES[server])
    assert space.server == server and space.server_version is None
    expected = {c.name: dict(c.params) for c in CATALOGUE if c.server == server and c.params}
    assert {p.name: p.env for p in space.presets} == expected


def test_a_switch_the_named_version_lacks_is_refused(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text('server = "vllm"\nserver_version = "0.16.0"\n'
                    '[[presets]]\nname = "fi"\nenv = { VLLM_ALLREDUCE_USE_FLASHINFER = "1" }\n'
                    '[variables.VLLM_USE_NCCL_SYMM_MEM]\nvalues = ["1"]\n')
    with pytest.raises(InputError) as err:
        load_space(path)
    text = str(err.value)
    assert "presets[0].env.VLLM_ALLREDUCE_USE_FLASHINFER" in text and "0.17.0+" in text and str(path) in text
    assert "VLLM_USE_NCCL_SYMM_MEM" not in text  # 0.16.0 has it (0.11.0+)
    path.write_text(path.read_text().replace("0.16.0", "0.17.0"))
    assert load_space(path).server_version == "0.17.0"
    path.write_text(path.read_text().replace('"0.17.0"', '"latest"'))
    with pytest.raises(InputError, match="server_version"):
        load_space(path)


def test_a_version_without_its_server_or_another_servers_variable_is_refused(tmp_path):
    path = tmp_path / "mixed.toml"
    path.write_text('server_version = "0.11.0"\n[[presets]]\nname = "fi"\nenv = { VLLM_ALLREDUCE_USE_FLASHINFER = "1" }\n')
    with pytest.raises(InputError, match="a version of which server"):
        load_space(path)
    path.write_text('server = "sglang"\n[[presets]]\nname = "fi"\nenv = { VLLM_ALLREDUCE_USE_FLASHINFER = "1" }\n')
    with pytest.raises(InputError) as err:
        load_space(path)
    assert "presets[0].env.VLLM_ALLREDUCE_USE_FLASHINFER" in str(err.value) and "read by vLLM" in str(err.value)


def test_backends_doc_table_is_the_catalogue():
    text = DOC.read_text()
    for row in table_rows():
        assert row in text, f"docs/BACKENDS.md lacks (or has an old) row:\n{row}"
    rows = [line for line in text.splitlines() if line.startswith(("| vllm |", "| sglang |"))]
    assert len(rows) == len(CATALOGUE)


if __name__ == "__main__":  # print the table for docs/BACKENDS.md
    print("\n".join(table_rows()))
