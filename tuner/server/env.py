"""The server's environment: what a launch inherits from the runner, drops, and sets.

The same rules for the baseline and every trial, so a user's shell cannot leak tuning into any
measurement (:func:`build_env`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from tuner.nccl import OWN_PREFIX, is_hardware_selector, is_tuning_variable

__all__ = ["build_env", "split_inherited"]


def split_inherited(inherited: Mapping[str, str], varied: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """``(removed, kept)``: the inherited NCCL variables a launch drops and keeps.

    Every inherited ``NCCL_*`` and ``CUDA_DEVICE_MAX_CONNECTIONS`` is dropped, so a user's shell
    cannot leak tuning into any measurement, except the variables that select hardware rather
    than tune it (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA`` and kin:
    :data:`tuner.nccl.HARDWARE_SELECTORS`, with their NCCL sources), which a cluster needs
    and which are kept unless ``varied`` (the space's names) varies them.
    """
    tuning = sorted(k for k in inherited if is_tuning_variable(k))
    kept = [k for k in tuning if is_hardware_selector(k) and k not in varied]
    return [k for k in tuning if k not in kept], kept


def build_env(inherited: Mapping[str, str], server_env: Mapping[str, str], trial_env: Mapping[str, str],
              varied: Collection[str] = ()) -> tuple[dict[str, str], list[str]]:
    """The server's environment and the inherited tuning variables removed from it
    (:func:`split_inherited`), for the baseline and every trial alike; then ``server_env``
    (fixed for all trials) and ``trial_env`` are applied. Returns ``(env, removed_names)``.
    nccl-tune's own ``NCCL_TUNE_*`` settings (a storage URL may hold a password) are nccl-tune's,
    not the server's: they are left out and not reported.
    """
    removed, _kept = split_inherited(inherited, varied)
    env = {k: v for k, v in inherited.items() if k not in removed and not k.startswith(OWN_PREFIX)}
    env.update(server_env)
    env.update(trial_env)
    return env, removed
