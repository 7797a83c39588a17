"""load_config on real files: every kind of problem is refused with file, dotted key, the value
as written and what is accepted, all problems of a file in one InputError."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tuner.errors import ExitCode, InputError
from tuner.inputs.config import ServerConfig, SmokeCheck, load_config

PY = sys.executable
SERVER = f'[server]\ncommand = ["{PY}", "serve", "--port", "{{port}}"]\n'


@pytest.fixture
def space(tmp_path: Path) -> Path:
    path = tmp_path / "space.toml"
    path.write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    return path


def _load(tmp_path: Path, text: str, **kwargs) -> object:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return load_config(path, **kwargs)


def _refused(tmp_path: Path, text: str, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text, **kwargs)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return info.value


def _one(tmp_path: Path, text: str, **kwargs) -> InputError:
    err = _refused(tmp_path, text, **kwargs)
    assert len(err.problems) == 1, str(err)
    assert str(err).startswith(f"{tmp_path / 'exp.toml'}: key '{err.key}' has value {err.value}"), str(err)
    return err


def test_a_good_file_with_defaults(tmp_path, space):
    cfg = _load(tmp_path, SERVER + f'env = {{ NCCL_BUFFSIZE = 16777216, HF_TOKEN = "hf_x" }}\n[sweep]\nspace = "{space}"\n')
    assert cfg.path == tmp_path / "exp.toml"
    assert cfg.server.command == (PY, "serve", "--port", "{port}")
    assert cfg.server.env == {"NCCL_BUFFSIZE": "16777216", "HF_TOKEN": "hf_x"}  # integers as NCCL reads them
    assert (cfg.server.port, cfg.server.host, cfg.server.health_path, cfg.server.model) == (8000, "127.0.0.1", "/health", None)
    assert (cfg.server.ready_timeout_s, cfg.server.teardown_grace_s, cfg.server.log_max_bytes) == (2700.0, 30.0, 50 * 1024 * 1024)
    assert cfg.server.base_url == "http://127.0.0.1:8000"
    p = cfg.probe
    assert (p.prompt, p.max_tokens, p.warmup, p.repeats, p.max_repeats, p.ci_target, p.stall_timeout_s) == (
        "Count from 1 to 50.", 512, 1, 3, 15, 0.01, 120.0)
    assert (p.check, p.concurrency, p.concurrency_requests) == (None, (), 4)
    s = cfg.sweep
    assert (s.space, s.trials, s.mode, s.seed, s.baseline_every, s.target) == (space, 12, "search", None, 5, None)



@pytest.mark.parametrize("written", ["output_tok_s", "decode_tok_s"])
def test_the_metric_is_read_from_the_file(tmp_path, space, written):
    from tuner.record import Metric

    cfg = _load(tmp_path, SERVER + f'[probe]\nmetric = "{written}"\n[sweep]\nspace = "{space}"\n')
    assert cfg.probe.metric is Metric(written)


def test_an_unknown_metric_is_refused_naming_both(tmp_path, space):
    err = _one(tmp_path, SERVER + f'[probe]\nmetric = "tok_s"\n[sweep]\nspace = "{space}"\n')
    assert err.key == "probe.metric" and '"output_tok_s"' in str(err) and '"decode_tok_s"' in str(err)

def test_every_field_set(tmp_path, space):
    cfg = _load(tmp_path, f"""
[server]
command = "{PY} -m vllm.entrypoints.openai.api_server --port {{port}}"
port = 9000
host = "localhost"
ready_timeout_s = 60
env = {{ NCCL_PROTO = "LL128" }}
health_path = "/v1/models"
model = "m"
teardown_grace_s = 2.5
log_max_bytes = 4096
[probe]
prompt = "Hi"
max_tokens = 2
warmup = 0
repeats = "auto"
max_repeats = 20
ci_target = 0.02
stall_timeout_s = 5
check = {{ prompt = "Capital of France?", expect = "Paris" }}
concurrency = [1, 8]
concurrency_requests = 16
[sweep]
space = "{space}"
trials = 3
mode = "presets"
seed = 7
baseline_every = 2
target = 90.5
""", allow_unsafe=True)
    assert cfg.server.command == (PY, "-m", "vllm.entrypoints.openai.api_server", "--port", "{port}")  # shlex split
    assert cfg.server.env == {"NCCL_PROTO": "LL128"}  # allowed by allow_unsafe
    assert cfg.server.ready_timeout_s == 60.0 and isinstance(cfg.server.ready_timeout_s, float)
    assert cfg.probe.repeats == "auto" and cfg.probe.check == SmokeCheck(prompt="Capital of France?", expect="Paris")
    assert cfg.probe.concurrency == (1, 8)
    assert (cfg.sweep.mode, cfg.sweep.seed, cfg.sweep.baseline_every, cfg.sweep.target) == ("presets", 7, 2, 90.5)


@pytest.mark.parametrize("probe,level", [("", 1), ("concurrency = [8, 32]\njudge_concurrency = 32", 32),
                                         ("concurrency = [8]\njudge_concurrency = 1", 1)])
def test_judge_concurrency_is_the_single_stream_or_a_measured_level(tmp_path, space, probe, level):
    cfg = _load(tmp_path, SERVER + f"[probe]\n{probe}\n[sweep]\nspace = \"{space}\"\n")
    assert cfg.probe.judge_concurrency == level


def test_argv_substitutes_port_python_and_home(tmp_path, space):
    cfg = _load(tmp_path, f'[server]\ncommand = ["{{python}}", "~/srv.py", "--port={{port}}"]\nport = 8123\n'
                          f'[sweep]\nspace = "{space}"\n')
    assert cfg.server.argv() == [PY, os.path.expanduser("~/srv.py"), "--port=8123"]
    assert cfg.server.argv(port=9001)[2] == "--port=9001"


def test_braces_inside_a_longer_argument_are_passed_as_written(tmp_path, space):
    cfg = _load(tmp_path, f'[server]\ncommand = ["python3", "-c", "print(f\'{{i}}\')", "--port", "{{port}}"]\n'
                          f'[sweep]\nspace = "{space}"\n')
    assert cfg.server.argv()[2] == "print(f'{i}')"


def test_config_is_immutable(tmp_path, space):
    cfg = _load(tmp_path, SERVER + f'[sweep]\nspace = "{space}"\n')
    with pytest.raises(ValidationError):
        cfg.server.port = 1  # type: ignore[misc]


def test_server_config_built_in_code_is_validated_without_lookups():
    server = ServerConfig(command=("no-such-program-xyz", "--port", "{port}"), port=18999, teardown_grace_s=1,
                          env={"HF_TOKEN": "hf_secret", "NCCL_BUFFSIZE": 4096})
    assert server.env == {"HF_TOKEN": "hf_secret", "NCCL_BUFFSIZE": "4096"} and server.teardown_grace_s == 1.0
    with pytest.raises(ValidationError):
        ServerConfig(command=("x",), env={"NCCL_BUFFSIZE": "4M"})


def test_space_kept_unresolved_when_told(tmp_path):
    cfg = _load(tmp_path, SERVER + '[sweep]\nspace = "elsewhere.toml"\n', resolve_space=False)
    assert cfg.sweep.space == Path("elsewhere.toml")


def test_program_checked_unless_told_not_to(tmp_path, space):
    sweep = f'[sweep]\nspace = "{space}"\n'
    err = _one(tmp_path, '[server]\ncommand = ["no-such-program-xyz", "serve"]\n' + sweep)
    assert (err.key, err.value, err.why) == ("server.command[0]", '"no-such-program-xyz"', "not on PATH")
    assert "program on PATH" in err.accepted
    err = _one(tmp_path, '[server]\ncommand = "/nonexistent/vllm serve"\n' + sweep)
    assert (err.key, err.value, err.why) == ("server.command[0]", '"/nonexistent/vllm"', "not found or not executable")
    assert _load(tmp_path, '[server]\ncommand = ["no-such-program-xyz"]\n' + sweep, check_program=False)
    assert _load(tmp_path, '[server]\ncommand = ["{python}", "-m", "x"]\n' + sweep)  # {python}: this interpreter


@pytest.mark.parametrize("server,key,value,accepted", [
    ("command = 5", "server.command", "5", "a non-empty list of strings (argv), or a string split with shlex"),
    ("command = []", "server.command", "[]", "a non-empty list of strings"),
    ('command = ["vllm", 8]', "server.command", '["vllm", 8]', "a non-empty list of strings"),
    ('command = ["vllm", ""]', "server.command", '["vllm", ""]', "a non-empty list of strings"),
    ("command = \"vllm serve 'unclosed\"", "server.command", "\"vllm serve 'unclosed\"", "a string split with shlex"),
    ('command = ["vllm", "serve", "--port", "{prot}"]', "server.command[3]", '"{prot}"',
     "the placeholders {port}, {python}, {node_rank}, {nnodes}, {head} and {dist_port}"),
    ('command = ["vllm", "serve", "--port={prot}"]', "server.command[2]", '"--port={prot}"',
     "the placeholders {port}, {python}, {node_rank}, {nnodes}, {head} and {dist_port}"),
    ("port = 70000", "server.port", "70000", "an integer in [1, 65535]"),
    ('port = "8000"', "server.port", '"8000"', "an integer in [1, 65535]"),
    ("port = true", "server.port", "true", "an integer in [1, 65535]"),
    ("port = 80.0", "server.port", "80.0", "an integer in [1, 65535]"),
    ("ready_timeout_s = -5", "server.ready_timeout_s", "-5", "a number above 0"),
    ("teardown_grace_s = 0", "server.teardown_grace_s", "0", "a number above 0"),
    ('host = ""', "server.host", '""', "a non-empty string"),
    ('model = ""', "server.model", '""', "a non-empty string"),
    ('health_path = "health"', "server.health_path", '"health"', "a path starting with '/'"),
    ("log_max_bytes = 100", "server.log_max_bytes", "100", "an integer in [4096, inf]"),
    ('env = ["NCCL_PROTO=LL"]', "server.env", '["NCCL_PROTO=LL"]', "a table such as"),
    ("env = { NCCL_BUFFSIZE = 1.5 }", "server.env.NCCL_BUFFSIZE", "1.5", "a string or an integer"),
    ("env = { NCCL_P2P_DISABLE = true }", "server.env.NCCL_P2P_DISABLE", "true", "a string or an integer"),
    ('env = { NCCL_BUFFSIZE = "4M" }', "server.env.NCCL_BUFFSIZE", '"4M"', "a plain integer"),
    ('env = { NCCL_ALGO = "Ring,Hypercube" }', "server.env.NCCL_ALGO", '"Ring,Hypercube"', "a comma list of"),
    ("env = { NCCL_NTHREADS = 100 }", "server.env.NCCL_NTHREADS", "100", "multiple of 32"),
    ('env = { NCCL_PROTO = "LL128" }', "server.env.NCCL_PROTO", '"LL128"', "pass --allow-unsafe"),
    ('env = { NCCL_PRTO = "LL" }', "server.env.NCCL_PRTO", '"LL"', ""),
    ("portt = 1", "server.portt", "1", "the keys api_key, command, env, expected_load_s, health_path, host, kind, log_max_bytes, model, nodes, port"),
])
def test_server_problems(tmp_path, space, server, key, value, accepted):
    base = "[server]\n" if server.startswith("command") else SERVER
    err = _one(tmp_path, base + server + f'\n[sweep]\nspace = "{space}"\n')
    assert (err.key, err.value) == (key, value), str(err)
    assert accepted in err.accepted, str(err)


@pytest.mark.parametrize("probe,key,value,accepted", [
    ("repeats = 0", "probe.repeats", "0", 'an integer in [2, 1000], or "auto"'),
    ("repeats = 1", "probe.repeats", "1", 'an integer in [2, 1000], or "auto"'),
    ('repeats = "many"', "probe.repeats", '"many"', 'or "auto"'),
    ("repeats = true", "probe.repeats", "true", 'or "auto"'),
    ("max_tokens = 1", "probe.max_tokens", "1", "an integer in [2, 1000000]"),
    ("warmup = -1", "probe.warmup", "-1", "an integer in [0, 100]"),
    ("max_repeats = 1", "probe.max_repeats", "1", "an integer in [2, 1000]"),
    ("ci_target = 0.5", "probe.ci_target", "0.5", "a number above 0 and below 0.5"),
    ("stall_timeout_s = 0", "probe.stall_timeout_s", "0", "a number above 0"),
    ('prompt = ""', "probe.prompt", '""', "a non-empty string"),
    ('check = "Paris"', "probe.check", '"Paris"', 'expect = "Paris"'),
    ('check = { prompt = "q" }', "probe.check", '{ prompt = "q" }', "and/or count_to = 50"),
    ('check = { prompt = "q", expect = "" }', "probe.check.expect", '""', "a non-empty string"),
    ('check = { prompt = "q", expect = "a", hint = "b" }', "probe.check.hint", '"b"', "the keys count_to, expect, max_tokens, prompt"),
    ("concurrency = [1, 0]", "probe.concurrency[1]", "0", "a list of integers in [1, 1024]"),
    ("concurrency = 4", "probe.concurrency", "4", "a list of integers in [1, 1024]"),
    ("concurrency_requests = 0", "probe.concurrency_requests", "0", "an integer in [1, 10000]"),
    ("concurrency = [2, 4]\njudge_concurrency = 8", "probe.judge_concurrency", "8",
     "1 (the single-stream probe) or one of probe.concurrency ([2, 4])"),
    ("judge_concurrency = 4", "probe.judge_concurrency", "4", "one of probe.concurrency, which is empty"),
    ("judge_concurrency = 0", "probe.judge_concurrency", "0", "1 (the single-stream probe) or one of"),
    ('judge_concurrency = "8"', "probe.judge_concurrency", '"8"', "1 (the single-stream probe) or one of"),
])
def test_probe_problems(tmp_path, space, probe, key, value, accepted):
    err = _one(tmp_path, SERVER + f"[probe]\n{probe}\n[sweep]\nspace = \"{space}\"\n")
    assert (err.key, err.value) == (key, value), str(err)
    assert accepted in err.accepted, str(err)


@pytest.mark.parametrize("sweep,key,value,accepted", [
    ('mode = "grid"', "sweep.mode", '"grid"', "search or presets"),
    ("trials = 0", "sweep.trials", "0", "an integer in [1, 10000]"),
    ("seed = -1", "sweep.seed", "-1", "an integer in [0, inf]"),
    ("baseline_every = -1", "sweep.baseline_every", "-1", "an integer in [0, 10000]"),
    ("target = 0", "sweep.target", "0", "a number above 0"),
    ("budget = 3", "sweep.budget", "3", "the keys baseline_every, mode, seed, soak_minutes, space, target, trials"),
])
def test_sweep_problems(tmp_path, space, sweep, key, value, accepted):
    err = _one(tmp_path, SERVER + f"[sweep]\nspace = \"{space}\"\n{sweep}\n")
    assert (err.key, err.value) == (key, value), str(err)
    assert accepted in err.accepted, str(err)


def test_missing_space_file(tmp_path):
    err = _one(tmp_path, SERVER + '[sweep]\nspace = "nope.toml"\n')
    assert (err.key, err.value, err.why) == ("sweep.space", '"nope.toml"', "file not found")
    assert "relative to the experiment file or to the current directory" in err.accepted


@pytest.mark.parametrize("text,key,value,accepted", [
    ('colour = "blue"\n' + SERVER, "colour", '"blue"', "the keys gates, model, nccl, probe, screen, server, sweep"),
    ("server = 5\n", "server", "5", "a [server] table"),
    ("[probe]\nrepeats = 3\n", "server", "(missing)", "a [server] table with at least 'command'"),
    ("[server]\nport = 8000\n", "server.command", "(missing)", "a non-empty list of strings"),
])
def test_file_level_problems(tmp_path, space, text, key, value, accepted):
    err = _one(tmp_path, text + f'\n[sweep]\nspace = "{space}"\n' if "[sweep]" not in text else text)
    assert (err.key, err.value) == (key, value), str(err)
    assert accepted in err.accepted, str(err)


def test_unreadable_files(tmp_path):
    err = _one(tmp_path, "[server\ncommand = ")
    assert (err.key, err.accepted) == ("(file)", "valid TOML")
    with pytest.raises(InputError, match="file not found"):
        load_config(tmp_path / "missing.toml")


def test_every_problem_of_a_file_in_one_error(tmp_path):
    err = _refused(tmp_path, """
colour = "blue"
[server]
command = ["/nonexistent/vllm", "serve"]
port = "8000"
env = { NCCL_BUFFSIZE = "4M", NCCL_PROTO = "LL128", HF_TOKEN = 1.5 }
[probe]
repeats = 1
concurrency = [1, 0]
[sweep]
space = "nope.toml"
mode = "grid"
""")
    keys = [p.key for p in err.problems]
    assert sorted(keys) == sorted(["colour", "server.command[0]", "server.port", "server.env.NCCL_BUFFSIZE",
                                   "server.env.NCCL_PROTO", "server.env.HF_TOKEN", "probe.repeats",
                                   "probe.concurrency[1]", "sweep.space", "sweep.mode"])
    text = str(err)
    assert text.startswith("10 problems:\n")
    lines = text.splitlines()[1:]
    assert len(lines) == 10 and all(line.startswith(f"- {tmp_path / 'exp.toml'}: key '") for line in lines)
    assert all("; accepted: " in line for line in lines)


def test_values_shown_as_written_secrets_hidden(tmp_path, space):
    sweep = f'[sweep]\nspace = "{space}"\n'
    err = _refused(tmp_path, """
[server]
command = [1, "serve"]
env = { HF_TOKEN = 1.5, NCCL_PROTO = ["LL"] }
api_token = "sk-verysecret"
[probe]
check = { prompt = "q", expect = "Paris", extra = [1, 2] }
""" + sweep)
    shown = {p.key: p.value for p in err.problems}
    assert shown == {"server.command": '[1, "serve"]', "server.env.HF_TOKEN": "***",
                     "server.env.NCCL_PROTO": '["LL"]', "server.api_token": "***", "probe.check.extra": "[1, 2]"}
    assert "verysecret" not in str(err) and "1.5" not in str(err)
    assert "key 'server.command' has value [1, \"serve\"];" in str(err)  # a list, not a repr'd tuple
    err = _one(tmp_path, '[server]\ncommand = "no-such-program-xyz --port {port}"\n' + sweep)
    assert err.value == '"no-such-program-xyz"'
    err = _one(tmp_path, "[server]\ncommand = { argv = [\"a b\"], \"odd name\" = 2 }\n" + sweep)
    assert err.value == '{ argv = ["a b"], "odd name" = 2 }'


def test_min_channels_above_max_is_what_nccl_allows_and_is_noted(tmp_path, space):
    path = tmp_path / "exp.toml"
    path.write_text(SERVER + 'env = { NCCL_MIN_NCHANNELS = "16", NCCL_MAX_NCHANNELS = "8" }\n'
                    f'[sweep]\nspace = "{space}"\n')
    cfg = load_config(path)
    assert cfg.server.env["NCCL_MIN_NCHANNELS"] == "16"
    assert any("max, then min" in n for n in cfg.notices)


def test_nccl_version_decides_the_rules(tmp_path, space):
    path = tmp_path / "exp.toml"
    body = SERVER + 'env = { NCCL_ALGO = "allreduce:ring;broadcast:tree" }\n' + f'[sweep]\nspace = "{space}"\n'
    path.write_text(body + '[nccl]\nversion = "2.24.3"\n')
    assert load_config(path).nccl.version == "2.24.3"
    path.write_text(body + '[nccl]\nversion = "2.21.5"\n')  # per-collective syntax arrived in 2.24
    assert _refused(tmp_path, path.read_text()).key == "server.env.NCCL_ALGO"
    path.write_text(SERVER + f'[sweep]\nspace = "{space}"\n[nccl]\nversion = "two"\n')
    assert _refused(tmp_path, path.read_text()).key == "nccl.version"


@pytest.mark.parametrize(("written", "stored"), [("amd", "AMD"), ("Intel", "Intel"), (" ARM ", "ARM"),
                                                 ("zhaoxin", "Zhaoxin"), ("power", "POWER")])
def test_nccl_cpu_vendor_any_case(tmp_path, space, written, stored):
    cfg = _load(tmp_path, SERVER + f'[sweep]\nspace = "{space}"\n[nccl]\ncpu_vendor = "{written}"\n')
    assert cfg.nccl.cpu_vendor == stored
    assert _load(tmp_path, SERVER + f'[sweep]\nspace = "{space}"\n').nccl.cpu_vendor is None


@pytest.mark.parametrize("written", ['"epyc"', "2", '"mixed"'])
def test_nccl_cpu_vendor_refused_names_file_key_value_accepted(tmp_path, space, written):
    err = _one(tmp_path, SERVER + f'[sweep]\nspace = "{space}"\n[nccl]\ncpu_vendor = {written}\n')
    assert err.key == "nccl.cpu_vendor" and "'Intel', 'AMD', 'Zhaoxin', 'ARM', 'POWER' (any case)" in err.accepted
    assert str(tmp_path / "exp.toml") in str(err)
