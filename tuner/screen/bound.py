"""How much NCCL tuning can possibly gain on decode, from one screen time and one TPOT.

Model. One decode step (one output token per stream) takes

    TPOT = compute + allreduces_per_token x t_allreduce

where ``t_allreduce`` is the time of one tensor-parallel allreduce at the decode message size
and ``compute`` is everything else (GEMMs, attention, norms, sampling, launch gaps). Taking
``t_allreduce`` from the untuned screen (nccl-tests at the decode size under the server's
untouched environment) and TPOT from the baseline relaunch gives

- the share of decode spent in allreduce: ``n x t / TPOT``;
- tok/s if allreduce were free: ``1 / (TPOT - n x t)``, the ceiling of any NCCL tuning;
- tok/s if every allreduce took the best screened set's time ``t_best``:
  ``1 / (TPOT - n x t + n x t_best)``, what the screen predicts for that set.

What the isolated measurement misses, so the bound is an estimate, not a guarantee:

- **Launch overhead.** nccl-tests launches each iteration from the host (unless ``-G``), so its
  time includes a kernel launch that a server replaying a captured CUDA graph does not pay: the
  screen overstates ``t``, the share and the bound (and can exceed TPOT: then ``reliable`` is
  False and the bound is not to be believed).
- **Overlap.** Where the server overlaps communication with compute, shortening the allreduce
  shortens the step by less than ``n x (t - t_best)``.
- **Other paths.** A server may carry small allreduces outside NCCL (vLLM's custom allreduce,
  symmetric memory, fused allreduce+RMSNorm); then NCCL settings do not touch them and this
  bound does not apply. The embedding allreduce and logits gather are not counted.
- **Conditions.** Clocks, contention and the other processes on the GPUs differ between an
  idle benchmark and a loaded server.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Bound",
    "allreduce_bound",
]


@dataclass(frozen=True)
class Bound:
    """The bound on decode speed-up from faster allreduces. Times in seconds, rates in tok/s,
    gains in percent of the baseline's tok/s.

    ``allreduce_share`` is the fraction (0..1, can exceed 1 when the screen overstates) of TPOT
    spent in allreduce; ``max_gain_pct`` the gain if allreduce were free; ``best_gain_pct`` the
    gain predicted for the best screened set (None without one). ``reliable`` is False when the
    screened allreduce time alone exceeds TPOT, and ``notes`` say why.
    """

    baseline_tpot_s: float
    allreduce_s_per_token: float
    allreduce_share: float
    baseline_tok_s: float
    free_allreduce_tok_s: float | None
    max_gain_pct: float | None
    best_allreduce_s_per_token: float | None
    best_tok_s: float | None
    best_gain_pct: float | None
    reliable: bool
    notes: tuple[str, ...] = ()

    def below_noise(self, noise_pct: float) -> bool:
        """True when even free allreduce would gain less than ``noise_pct`` percent: relaunching
        to tune NCCL cannot show a real gain over relaunch-to-relaunch noise."""
        return self.reliable and self.max_gain_pct is not None and self.max_gain_pct < noise_pct

    def sentence(self) -> str:
        """The one line printed after the baseline."""
        if not self.reliable or self.max_gain_pct is None:
            return ("The screened allreduce time does not fit the measured TPOT "
                    f"({self.allreduce_share:.0%} of it); no bound on the NCCL tuning gain can be given.")
        text = (f"Allreduce takes about {self.allreduce_share:.0%} of decode time: NCCL tuning can gain "
                f"at most {self.max_gain_pct:.1f} % ({self.baseline_tok_s:.1f} -> "
                f"{self.free_allreduce_tok_s:.1f} tok/s if allreduce were free)")
        if self.best_gain_pct is not None:
            text += f"; the best screened set predicts {self.best_gain_pct:+.1f} % ({self.best_tok_s:.1f} tok/s)"
        return text + "."


def allreduce_bound(screen_time_us_at_decode: float, allreduces_per_token: int, baseline_tpot_s: float,
                    best_screen_time_us: float | None = None) -> Bound:
    """The decode-speed bound from the untuned screen time, the allreduce count and the TPOT.

    ``screen_time_us_at_decode``: untuned nccl-tests time (us) of one allreduce at the decode
    message size (use the out-of-place half: vLLM's NCCL allreduce writes a new tensor);
    ``allreduces_per_token``: from :func:`tuner.inputs.model.allreduces_per_token`;
    ``baseline_tpot_s``: the baseline relaunch's time per output token (s, single stream);
    ``best_screen_time_us``: the fastest screened set's time at the same size (us), optional.
    Raises ValueError for a non-positive time, TPOT or count.
    """
    if screen_time_us_at_decode <= 0 or baseline_tpot_s <= 0 or allreduces_per_token <= 0:
        raise ValueError("screen time, TPOT and allreduce count must all be positive, got "
                         f"{screen_time_us_at_decode} us, {baseline_tpot_s} s, {allreduces_per_token}")
    if best_screen_time_us is not None and best_screen_time_us <= 0:
        raise ValueError(f"best_screen_time_us must be positive, got {best_screen_time_us}")
    ar = allreduces_per_token * screen_time_us_at_decode * 1e-6
    share = ar / baseline_tpot_s
    base_rate = 1.0 / baseline_tpot_s
    compute = baseline_tpot_s - ar
    notes: list[str] = []
    reliable = compute > 0
    free_rate = max_gain = best_ar = best_rate = best_gain = None
    if reliable:
        free_rate = 1.0 / compute
        max_gain = (baseline_tpot_s / compute - 1.0) * 100.0
    else:
        notes.append(f"{allreduces_per_token} x {screen_time_us_at_decode:.1f} us = {ar * 1e3:.2f} ms of "
                     f"allreduce per token exceeds the measured TPOT {baseline_tpot_s * 1e3:.2f} ms: the isolated "
                     "benchmark overstates the in-server allreduce (launch overhead outside CUDA graphs, or "
                     "NCCL does not carry these allreduces).")
    if best_screen_time_us is not None:
        best_ar = allreduces_per_token * best_screen_time_us * 1e-6
        if reliable:
            best_rate = 1.0 / (compute + best_ar)
            best_gain = (baseline_tpot_s / (compute + best_ar) - 1.0) * 100.0
    return Bound(baseline_tpot_s=baseline_tpot_s, allreduce_s_per_token=ar, allreduce_share=share,
                 baseline_tok_s=base_rate, free_allreduce_tok_s=free_rate, max_gain_pct=max_gain,
                 best_allreduce_s_per_token=best_ar, best_tok_s=best_rate, best_gain_pct=best_gain,
                 reliable=reliable, notes=tuple(notes))
