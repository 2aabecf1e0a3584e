"""A pool of environments designed before training: 'fixed_env_grpo' (the backbone) and 'fixed_external_designer'
with ``baseline.external_pool`` 'offline' (the external model; :func:`spade.core.env_source.designs_pool`).

The pool holds ``baseline.pool_size`` valid environments (:func:`pool_size_of`; 0 = as many as a SPADE run
designs), designed in rounds of one slot set each, at most :func:`pool_max_rounds` of them. Each step (or
window, ``baseline.pool_redraw``) plays one draw of ``slots`` entries (:func:`pool_draws`, the reference's
sampler: seeded shuffles, without replacement across draws, :func:`pool_order_seed`). The self-play core designs
and draws the pool in :mod:`spade.core.fixed_envs`.
"""

from __future__ import annotations

import math
import random

from spade.core.env_source import baseline_of, pool_slots
from spade.seeding import derive_seed


def pool_size_of(config) -> int:
    """Valid environments a designed pool is to hold: ``baseline.pool_size``, or with 0 as many as a SPADE run of
    the same config designs over its regenerations, ceil(total_steps / regen_interval) x slots (400 / 4 x 24 =
    2,400 with the games recipe)."""
    size = baseline_of(config).pool_size
    if size:
        return size
    sp = config.selfplay
    return math.ceil(sp.total_steps / sp.regen_interval) * pool_slots(config)


def pool_max_rounds(config) -> int:
    """Design rounds (one slot set each) a designed pool may take: ceil(pool_round_factor x pool size / slots)."""
    return math.ceil(baseline_of(config).pool_round_factor * pool_size_of(config) / pool_slots(config))


def pool_draws(n_entries: int, per_draw: int, count: int, seed: int) -> list:
    """The first ``count`` draws of a designed pool of ``n_entries`` environments, ``per_draw`` each (the reference's
    sampler, generalised): entry indices of pass p in the order ``random.Random(derive_seed(seed, 'pass', p))``
    shuffles ``range(n_entries)`` into; draws take the current pass's entries in that order, without replacement,
    and the next pass starts once the current one is used up. A draw that straddles two passes skips (and keeps
    for later, in order) the new pass's entries it already holds, so no draw repeats an entry. A draw holds
    min(per_draw, n_entries) entries. Returns [count] lists of indices."""
    if n_entries < 1 or per_draw < 1 or count < 0:
        raise ValueError(f"a designed pool needs n_entries >= 1, per_draw >= 1 and count >= 0, got {n_entries}, "
                         f"{per_draw}, {count}")
    want = min(per_draw, n_entries)
    draws: list = []
    stack: list = []  # the current pass's undrawn indices, next one last
    passes = 0
    for _ in range(count):
        chosen: list = []
        while len(chosen) < want:
            if not stack:
                order = list(range(n_entries))
                random.Random(derive_seed(seed, "pass", passes)).shuffle(order)
                stack = order[::-1]
                passes += 1
            taken = set(chosen)
            position = next(j for j in range(len(stack) - 1, -1, -1) if stack[j] not in taken)
            chosen.append(stack.pop(position))
        draws.append(chosen)
    return draws


def pool_order_seed(config) -> int:
    """Root seed of a designed pool's draw order (the reference shuffles with seed 42; ours derives from the master
    seed)."""
    return derive_seed(config.seed, "designed-pool-order")
