"""Learning-rate schedules as pure functions of the step: the paper's inverse square root with warmup, a linear
decay to zero at a planned end (in steps or in training minutes), and a short re-warmup after a resume without
optimizer moments; rate_factor turns a run's stored schedule into LambdaLR's factor."""


from __future__ import annotations

import logging
import math

log = logging.getLogger("nmt")

REWARM = 200  # updates over which a run resumed without its optimizer moments ramps its rate up again


def paper_peak_lr(d_model: int, warmup: int) -> float:
    """The peak of the paper's schedule, lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), reached at
    step = warmup: 7.0e-4 for base (512) and 4.9e-4 for big (1024) at warmup 4000."""
    return (d_model * warmup) ** -0.5


def inverse_sqrt(step: int, warmup: int) -> float:
    """The paper's schedule as a factor of the peak rate: linear warmup, then 1/sqrt(step)."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step))


def linear_decay(step: int, warmup: int, total: int) -> float:
    """Linear warmup, then a straight line from the peak at `warmup` to zero at `total`: under a fixed budget
    the rate anneals by the end of the run instead of staying at warmup^0.5 / total^0.5 of the peak."""
    step = max(step, 1)
    if step < warmup:
        return step / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


DECAYS = ("inverse-sqrt", "linear")


def linear_decay_in_time(step: int, warmup: int, elapsed: float, budget: float) -> float:
    """Linear warmup, under a straight line that falls from the peak at the start to zero when `budget`
    seconds of training are spent: a fixed budget of CPU time, whatever a step of the model costs (runs of
    different shapes compared at the same cost)."""
    return max(0.0, min(max(step, 1) / warmup, 1.0 - elapsed / budget))


def rate_factor(schedule: dict, elapsed=None):
    """The stored schedule as LambdaLR's factor of the peak rate, by the step counted from 0; `elapsed()`,
    the seconds trained so far, for a linear decay over --max-minutes. A run resumed from a slim resume point
    (no optimizer moments) ramps its rate up again over REWARM updates from the step it resumed at."""
    warmup = schedule["warmup"]
    if "minutes" in schedule:
        budget = 60 * schedule["minutes"]

        def factor(step: int) -> float:
            return linear_decay_in_time(step + 1, warmup, elapsed(), budget)
    elif schedule.get("decay", "inverse-sqrt") == "linear":
        total = schedule["total"]

        def factor(step: int) -> float:
            return linear_decay(step + 1, warmup, total)
    else:
        def factor(step: int) -> float:
            return inverse_sqrt(step + 1, warmup)
    if "rewarm_from" not in schedule:
        return factor
    start = schedule["rewarm_from"]
    return lambda step: factor(step) * min(1.0, max(step + 1 - start, 1) / REWARM)




def decay_end(schedule: dict) -> str:
    if "total" in schedule:
        return f" to 0 at step {schedule['total']}"
    return f" to 0 after {schedule['minutes']:g} minutes" if "minutes" in schedule else ""
