"""A hidden allreduce landscape shared by the test server (envrate_server.py) and the
all_reduce_perf stand-in (allreduce_standin.py). Stdlib only; imports nothing from ``tuner``.

Both read the same environment variables, so a test states one landscape in ``server.env``
(which nccl-tune applies to relaunches and screen runs alike) and the two agree by
construction: the stand-in's time at the decode size is the allreduce time the server's
decode step pays.

  ENVRATE_AR_US            untuned allreduce time at the decode size (us); the landscape is
                           active only when this is set
  ENVRATE_AR_EFFECTS       JSON {"NAME=value": factor} on the size-independent (latency) part
  ENVRATE_AR_LARGE_EFFECTS JSON {"NAME=value": factor} on the size-dependent (bandwidth) part
  ENVRATE_AR_KNEE          bytes at which both parts are equal for the untuned set (1 MiB)
  ENVRATE_AR_SIZE          the decode size the server pays (bytes, 14336)
  ENVRATE_AR_PER_TOKEN     allreduces per token (100)
  ENVRATE_COMPUTE_MS       everything else in a decode step (ms, 2.0)
  ENVRATE_AR_WRONG         JSON list of "NAME=value": a set holding one reports wrong values
  ENVRATE_AR_HANG          JSON list of "NAME=value": a set holding one hangs after its header

time_us(env, S) = AR_US x prod(EFFECTS) + AR_US x S / KNEE x prod(LARGE_EFFECTS);
decode tok/s    = 1000 / (COMPUTE_MS + PER_TOKEN x time_us(env, AR_SIZE) / 1000).
"""

import json


def active(env) -> bool:
    """True when the environment states an allreduce landscape."""
    return bool(env.get("ENVRATE_AR_US"))


def _factor(env, key: str) -> float:
    factor = 1.0
    for setting, value in json.loads(env.get(key, "{}")).items():
        name, _, wanted = setting.partition("=")
        if env.get(name) == wanted:
            factor *= float(value)
    return factor


def holds(env, key: str) -> bool:
    """True when the set holds one of the ``NAME=value`` settings listed in ``env[key]``."""
    for setting in json.loads(env.get(key, "[]")):
        name, _, wanted = setting.partition("=")
        if env.get(name) == wanted:
            return True
    return False


def time_us(env, size: int) -> float:
    """One allreduce of ``size`` bytes under the set in ``env`` (us)."""
    base = float(env["ENVRATE_AR_US"])
    knee = float(env.get("ENVRATE_AR_KNEE", str(1 << 20)))
    return base * _factor(env, "ENVRATE_AR_EFFECTS") + base * size / knee * _factor(env, "ENVRATE_AR_LARGE_EFFECTS")


def decode_rate(env) -> float:
    """Single-stream decode tok/s of the server under the set in ``env``."""
    per_token = int(env.get("ENVRATE_AR_PER_TOKEN", "100"))
    compute_ms = float(env.get("ENVRATE_COMPUTE_MS", "2.0"))
    size = int(env.get("ENVRATE_AR_SIZE", "14336"))
    return 1000.0 / (compute_ms + per_token * time_us(env, size) / 1000.0)
