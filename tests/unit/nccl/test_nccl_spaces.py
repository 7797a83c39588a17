"""The shipped search spaces obey NCCL's rules and say what they leave out."""

from pathlib import Path

from tuner.inputs.space import load_space
from tuner.nccl import NcclVersion, Topology, check_value, risky_reason
from tuner.nccl.decode import DecodeChoice, decode_effect

SPACES = Path(__file__).resolve().parents[3] / "search_spaces"
PCIE = Topology(nranks=8, nnodes=1, link="pcie", gpu_arch=120)


def test_spaces_load_and_keep_the_motivating_preset_first():
    for name in ("default", "safe", "exhaustive"):
        space = load_space(SPACES / f"{name}.toml")
        assert space.presets[0].env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16",
                                        "NCCL_BUFFSIZE": "16777216", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_every_value_is_valid_for_every_supported_version():
    for name in ("default", "exhaustive"):
        space = load_space(SPACES / f"{name}.toml", allow_unsafe=True)
        for version in ("2.18.1", "2.21.5", "2.24.3", "2.30.7"):
            for var, values in space.variables.items():
                for value in values:
                    assert check_value(var, value, NcclVersion.parse(version)) is None, (var, value, version)


def test_every_default_variable_can_act_on_a_decode_sized_allreduce():
    space = load_space(SPACES / "default.toml")
    v = NcclVersion(2, 27, 3)
    for var, values in space.variables.items():
        # the pair NCCL picks depends on the machine: lists act wherever it picks another one
        choice = DecodeChoice("Tree", "LL") if var in ("NCCL_ALGO", "NCCL_PROTO") else DecodeChoice("Ring", "LL")
        acting = [x for x in values if var not in decode_effect({var: x}, 14336, 8, choice, version=v,
                                                                  topology=PCIE).inert]
        assert acting, var
    assert "NCCL_BUFFSIZE" not in space.variables and "NCCL_MAX_NCHANNELS" not in space.variables
    tuned = load_space(SPACES / "default.toml").presets[0].env
    inert = decode_effect(tuned, 14336, 8, DecodeChoice("Ring", "LL"), version=v, topology=PCIE).inert
    assert {"NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS"} <= set(inert)


def test_risky_levels_are_named_in_the_space_file():
    text = (SPACES / "default.toml").read_text()
    assert "RISKY" in text and "PHB" in text
    space = load_space(SPACES / "default.toml")
    risky = [v for v in space.variables["NCCL_P2P_LEVEL"] if risky_reason("NCCL_P2P_LEVEL", v)]
    assert risky == ["PHB", "SYS"]
