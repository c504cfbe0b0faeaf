"""What loading a draft is worth: its forecast acceptance net of what the load costs.

Decoding never waits for a background load, but the load is not free: the loader's reading and
materialising share the CPU and memory bandwidth with the decoding thread, so every round that
runs while a load is in flight is slower (1.7x on 2 CPU cores in our measurements). On a fast
target with drafts of similar quality, a working set that follows every small change of forecast
spends more decoding time on loads than the better draft wins back.

So a missing draft is ranked by the acceptance rate that, with no load, would take the same time
over the tokens it can still serve: the forecast ``rate`` spread over ``horizon_tokens``, plus
the measured ``load_cost_s``. A draft forecast far above the resident ones (a specialist on its
own topic) keeps nearly all of its lead; one a few points better does not justify a load.
Resident and loading drafts are not charged: their cost is spent.
"""

from __future__ import annotations


def net_of_load(rate: float, k: int, round_s: float, load_cost_s: float, horizon_tokens: int) -> float:
    """The acceptance rate that, without a load, matches ``rate`` plus a load over ``horizon_tokens``.

    A round of ``k`` proposals at acceptance ``rate`` emits ``rate * k + 1`` tokens in ``round_s``
    (the model of :meth:`~memspec_ros.runtime.acceptance.AcceptanceSummary.expected_tokens_per_s`);
    the load adds ``load_cost_s / horizon_tokens`` to every token's time. The result is clamped at
    0 (a load that costs more than the whole horizon is worth nothing).
    """
    if load_cost_s <= 0.0 or k <= 0 or round_s <= 0.0:
        return rate
    if horizon_tokens <= 0:
        return 0.0
    per_token_s = round_s / (rate * k + 1.0) + load_cost_s / horizon_tokens
    return max(0.0, (round_s / per_token_s - 1.0) / k)
