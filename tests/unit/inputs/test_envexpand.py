"""``${NAME}`` in experiment files: one file for every host of a study (tuner.inputs.envexpand), and a
resume fingerprint and host type taken of the file as written."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from tuner.errors import InputError
from tuner.inputs.config import load_config
from tuner.inputs.envexpand import expand_text, references
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.study.host import command_identity, host_type, this_host
from tuner.study.resume import check_fingerprint
from tuner.study.storage import StudyStore


def _file(tmp_path: Path, server: str) -> Path:
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    p = tmp_path / "exp.toml"
    p.write_text(f'[server]\n{server}\n[sweep]\nspace = "{tmp_path / "space.toml"}"\n')
    return p


SERVER = (f'command = ["{sys.executable}", "-c", "pass", "--port", "{{port}}", "--gpus", "${{GPUS}}", "--cost", "$$5"]\n'
          'port = "${PORT}"\nready_timeout_s = "${READY_S}"\n'
          'env = { CUDA_VISIBLE_DEVICES = "${GPUS}", NOTE = "host ${HOST_TAG}-x" }')


def test_values_expand_from_the_environment_and_numbers_become_numbers(tmp_path: Path):
    env = {"PORT": "8123", "GPUS": "4,5,6,7", "READY_S": "90.5", "HOST_TAG": "b"}
    cfg = load_config(_file(tmp_path, SERVER), environ=env)
    assert cfg.server.port == 8123 and cfg.server.ready_timeout_s == 90.5
    assert cfg.server.argv()[-6:] == ["--port", "8123", "--gpus", "4,5,6,7", "--cost", "$5"]
    assert cfg.server.env == {"CUDA_VISIBLE_DEVICES": "4,5,6,7", "NOTE": "host b-x"}
    # What the file says stays available, unexpanded.
    assert cfg.written_command()[-6:] == ["--port", "{port}", "--gpus", "${GPUS}", "--cost", "$$5"]
    assert cfg.written_env() == {"CUDA_VISIBLE_DEVICES": "${GPUS}", "NOTE": "host ${HOST_TAG}-x"}


def test_unset_and_malformed_references_are_input_errors_naming_file_key_and_variable(tmp_path: Path):
    path = _file(tmp_path, SERVER.replace("${HOST_TAG}", "${1BAD}"))
    with pytest.raises(InputError) as err:
        load_config(path, environ={"PORT": "80x", "READY_S": "9"})
    text = str(err.value)
    assert str(path) in text and "server.command[6]" in text and "GPUS is not set" in text
    assert "server.env.CUDA_VISIBLE_DEVICES" in text and "server.env.NOTE" in text and "${1BAD}" in text
    assert "server.port" in text and "PORT holds '80x'" in text and "an integer" in text
    assert len(err.value.problems) == 4


def test_expand_text_and_references():
    assert expand_text("a$$b ${X} $Y {port}", {"X": "1"}) == ("a$b 1 $Y {port}", [])
    assert references("${A}-$${B}-${C}") == ["A", "C"]
    assert expand_text("${NOPE}", {})[1] == ["the environment variable NOPE is not set"]


def test_one_file_many_hosts_one_fingerprint_and_one_host_type(tmp_path: Path):
    """Two hosts with other ports and GPUs resume one study: the fingerprint is of the file as
    written, and their host type is the same."""
    path = _file(tmp_path, SERVER)
    a = load_config(path, environ={"PORT": "8001", "GPUS": "0,1", "READY_S": "60", "HOST_TAG": "a"})
    b = load_config(path, environ={"PORT": "8002", "GPUS": "2,3", "READY_S": "60", "HOST_TAG": "b"})
    store = StudyStore(optuna.create_study(direction="maximize"), {"NCCL_PROTO": ("unset", "LL")})
    check_fingerprint(store, a, [], str(path), "s")
    trial, _, rec = store.ask_fixed(store.params_of({}), TrialRecord(trial=-1, kind=Kind.BASELINE))
    rec.status, rec.output_tok_s, rec.output_tok_s_runs = Status.OK, 70.0, [70.0, 70.0]
    store.start(trial, rec)
    store.finish(trial, rec, 70.0)
    assert store.ok_baselines()  # from here on a changed server is refused
    check_fingerprint(store, b, [], str(path), "s")  # no InputError: same file as written
    assert store.info().fingerprint["server.command"][-3] == "${GPUS}"
    gpus = {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 8}
    assert host_type(gpus, a.written_command()) == host_type(gpus, b.written_command())
    assert host_type(gpus, a.written_command()).startswith("8 x NVIDIA H100 80GB HBM3 | python -c pass --gpus")


def test_command_identity_drops_the_port_and_the_programs_folder():
    assert command_identity(["/opt/venv/bin/vllm", "serve", "m", "--port", "{port}", "-tp", "8"]) == "vllm serve m -tp 8"
    assert command_identity(["{python}", "-m", "sglang.launch_server", "--port={port}"]) == "python -m sglang.launch_server"
    assert command_identity(["srv", "--gpus", "${CUDA_VISIBLE_DEVICES}"]) == "srv --gpus '${CUDA_VISIBLE_DEVICES}'"


def test_host_type_never_holds_a_secret(tmp_path: Path, nvml):
    nvml(["NVIDIA H100 80GB HBM3"] * 8)
    path = _file(tmp_path, f'command = ["{sys.executable}", "-c", "pass", "--token", "hf_abcdef123456"]')
    cfg = load_config(path, environ={})
    host = this_host(cfg, environ={"HF_TOKEN": "hf_abcdef123456", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert "hf_abcdef" not in host.host_type and "--token '***'" in host.host_type
    assert host.gpus == {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "driver": "550.54.15"}
    assert host.host_type.startswith("2 x NVIDIA H100 80GB HBM3 | ")  # the GPUs the server gets


def test_command_identity_hides_what_the_command_passes_as_a_secret():
    argv = ["env", "HF_TOKEN=hf_plain_secret_env", "python", "server.py", "--api-key", "sk-plain-secret-apikey",
            "--port", "{port}", "--hf-token", "${HF_TOKEN}"]
    assert command_identity(argv) == "env 'HF_TOKEN=***' python server.py --api-key '***' --hf-token '${HF_TOKEN}'"


def test_a_fingerprint_stored_with_a_secret_resumes_and_is_rewritten(tmp_path: Path):
    """A study stored before commands were redacted holds the command's secret in its
    fingerprint: the same file resumes it (no ResumeRefused after its baseline), and the stored
    fingerprint loses the secret."""
    path = _file(tmp_path, 'command = ["env", "HF_TOKEN=hf_plain_secret_env", "srv", "--api-key", "sk-plain-x"]')
    cfg = load_config(path, environ={})
    store = StudyStore(optuna.create_study(direction="maximize"), {"NCCL_PROTO": ("unset", "LL")})
    old = {"server.command": cfg.written_command(), "server.env": {}, "probe.prompt": cfg.probe.prompt,
           "probe.max_tokens": cfg.probe.max_tokens}
    store.update_info(fingerprint=old)  # as an older nccl-tune wrote it: the secrets in plain text
    trial, _, rec = store.ask_fixed(store.params_of({}), TrialRecord(trial=-1, kind=Kind.BASELINE))
    rec.status, rec.output_tok_s, rec.output_tok_s_runs = Status.OK, 70.0, [70.0, 70.0]
    store.start(trial, rec)
    store.finish(trial, rec, 70.0)
    check_fingerprint(store, cfg, [], str(path), "s")
    assert store.info().fingerprint["server.command"] == ["env", "HF_TOKEN=***", "srv", "--api-key", "***"]
