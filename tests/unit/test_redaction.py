"""Secret variables: named by TOKEN, KEY, SECRET or PASSWORD, their values never written."""

from tuner.redaction import REDACTED, is_secret, redact, scrub, secret_values


def test_secrets_unchanged():
    assert redact({"HF_TOKEN": "abc", "NCCL_PROTO": "LL"}) == {"HF_TOKEN": "***", "NCCL_PROTO": "LL"}
    assert is_secret("my_api_key") and not is_secret("NCCL_PROTO")


def test_secret_values_are_scrubbed_longest_first():
    env = {"HF_TOKEN": "abcd1234", "DB_PASSWORD": "abcd", "API_KEY": "x", "HOME": "/home/u"}
    assert secret_values(env) == ["abcd1234", "abcd"]  # under four characters: too short to scrub
    assert scrub("token abcd1234, password abcd, home /home/u", secret_values(env)) == \
        f"token {REDACTED}, password {REDACTED}, home /home/u"
