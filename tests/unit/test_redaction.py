"""Secret variables: named by TOKEN, KEY, SECRET or PASSWORD, their values never written."""

import pytest

from tuner.redaction import (
    REDACTED,
    argv_secrets,
    is_secret,
    is_secret_option,
    redact,
    redact_argv,
    scrub,
    secret_values,
)


def test_secrets_unchanged():
    assert redact({"HF_TOKEN": "abc", "NCCL_PROTO": "LL"}) == {"HF_TOKEN": "***", "NCCL_PROTO": "LL"}
    assert is_secret("my_api_key") and not is_secret("NCCL_PROTO")


def test_secret_values_are_scrubbed_longest_first():
    env = {"HF_TOKEN": "abcd1234", "DB_PASSWORD": "abcd", "API_KEY": "x", "HOME": "/home/u"}
    assert secret_values(env) == ["abcd1234", "abcd"]  # under four characters: too short to scrub
    assert scrub("token abcd1234, password abcd, home /home/u", secret_values(env)) == \
        f"token {REDACTED}, password {REDACTED}, home /home/u"


# -- secrets in a command: redact_argv ------------------------------------------------------

S = "hf_plain_secret_value"


@pytest.mark.parametrize(("argv", "shown"), [
    (["env", f"HF_TOKEN={S}", "python", "server.py"], ["env", "HF_TOKEN=***", "python", "server.py"]),
    (["docker", "run", "-e", f"HF_TOKEN={S}", "img"], ["docker", "run", "-e", "HF_TOKEN=***", "img"]),
    (["docker", "run", f"-eHF_TOKEN={S}", "img"], ["docker", "run", "-eHF_TOKEN=***", "img"]),
    (["docker", "run", f"-eHFTOKEN={S}", "img"], ["docker", "run", "-eHFTOKEN=***", "img"]),
    (["docker", "run", f"--env=HF_TOKEN={S}", "img"], ["docker", "run", "--env=HF_TOKEN=***", "img"]),
    (["docker", "run", "--env", f"MY_API_KEY={S}", "img"], ["docker", "run", "--env", "MY_API_KEY=***", "img"]),
    (["docker", "build", "--build-arg", f"GH_TOKEN={S}", "."], ["docker", "build", "--build-arg", "GH_TOKEN=***", "."]),
    (["docker", "build", f"--build-arg=GH_TOKEN={S}", "."], ["docker", "build", "--build-arg=GH_TOKEN=***", "."]),
    (["srun", f"--export=ALL,HF_TOKEN={S},NCCL_PROTO=LL", "vllm"],
     ["srun", "--export=ALL,HF_TOKEN=***,NCCL_PROTO=LL", "vllm"]),
    (["srun", f"--export=DB_PASSWORD={S}", "x"], ["srun", "--export=DB_PASSWORD=***", "x"]),
    (["vllm", "serve", "m", "--api-key", S], ["vllm", "serve", "m", "--api-key", "***"]),
    (["vllm", "serve", "m", f"--api-key={S}"], ["vllm", "serve", "m", "--api-key=***"]),
    (["x", "--hf-token", S, "--token", S, "--password", S, "--secret", S, "--key", S, "--api_key", S, "-apikey", S],
     ["x", "--hf-token", "***", "--token", "***", "--password", "***", "--secret", "***", "--key", "***",
      "--api_key", "***", "-apikey", "***"]),
    (["x", "--storage", f"postgresql://u:{S}@db:5432/n"], ["x", "--storage", "postgresql://u:***@db:5432/n"]),
])
def test_redact_argv_hides_each_spelling(argv, shown):
    assert redact_argv(argv) == shown
    assert S in argv_secrets(argv)


@pytest.mark.parametrize("argv", [
    ["vllm", "serve", "m", "--port", "{port}", "--max-num-batched-tokens", "8192", "--tokenizer", "t/x"],
    ["text-generation-launcher", "--max-total-tokens", "4096", "--max-batch-prefill-tokens", "512"],
    ["vllm", "serve", "m", "--ssl-keyfile", "/etc/k.pem", "--api-key-file", "/run/k", "--token-file", "/t"],
    ["vllm", "serve", "m", "--api-key", "${MY_API_KEY}", "--hf-token=$HF_TOKEN", "--token", "{port}"],
    ["env", "HF_TOKEN=${HF_TOKEN}", "NCCL_PROTO=LL", "-max_tokens=5", "http://host:8000/v1"],
    ["docker", "run", "-e", "HF_TOKEN", "--env-file", "/x/.env", "img", "--api-key", "--port", "8000"],
])
def test_redact_argv_keeps_everything_else_exactly(argv):
    assert redact_argv(argv) == argv
    assert argv_secrets(argv) == []


def test_secret_option_names_are_whole_words():
    assert is_secret_option("--api-key") and is_secret_option("--hf-token") and is_secret_option("--APIKEY")
    assert is_secret_option("--access-key") and is_secret_option("--db-password")
    assert not is_secret_option("--max-num-batched-tokens") and not is_secret_option("--tokenizer")
    assert not is_secret_option("--keep-alive") and not is_secret_option("--ssl-keyfile")
    assert not is_secret_option("--token-file") and not is_secret_option("--hf-token-path")


def test_argv_secrets_feed_scrub():
    argv = ["env", f"HF_TOKEN={S}", "python", "s.py", "--api-key", "sk-abc", "--token", "abc"]
    assert argv_secrets(argv) == [S, "sk-abc"]  # under four characters: too short to scrub
    assert scrub(f"ENVIRON {{'HF_TOKEN': '{S}'}} ARGV sk-abc", argv_secrets(argv)) == \
        "ENVIRON {'HF_TOKEN': '***'} ARGV ***"
