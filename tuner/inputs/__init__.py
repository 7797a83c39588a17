"""What the user writes: the experiment file, its schema, ${NAME} expansion, where its paths are found, the search space and the bundled ones, the model's config.json."""

from tuner.inputs.config import (
    DEFAULT_MAX_TOKENS,
    PROGRAM_ACCEPTED,
    ExperimentConfig,
    ProbeConfig,
    ServerConfig,
    SmokeCheck,
    load_config,
    program_problem,
    server_tls,
)
from tuner.inputs.locate import find_path
from tuner.inputs.lws import read_template
from tuner.inputs.model import allreduces_per_token, decode_allreduce_bytes, load_model_shape, prefill_allreduce_bytes
from tuner.inputs.nodes import NodesConfig
from tuner.inputs.schema import LoadContext, as_written, check_nccl
from tuner.inputs.space import BACKEND_SPACE, UNSET, Preset, SearchSpace, backend_space_path, load_space

__all__ = [
    "BACKEND_SPACE",
    "DEFAULT_MAX_TOKENS",
    "PROGRAM_ACCEPTED",
    "UNSET",
    "ExperimentConfig",
    "LoadContext",
    "NodesConfig",
    "Preset",
    "ProbeConfig",
    "SearchSpace",
    "ServerConfig",
    "SmokeCheck",
    "allreduces_per_token",
    "as_written",
    "backend_space_path",
    "check_nccl",
    "decode_allreduce_bytes",
    "find_path",
    "load_config",
    "load_model_shape",
    "load_space",
    "prefill_allreduce_bytes",
    "program_problem",
    "read_template",
    "server_tls",
]
