"""Classical RK4 with one provisional state, as MPAS's shallow-water core steps it:

    k_1 = T(y_n), y_p = y_n + dt/2 k_1, k_2 = T(y_p), y_p = y_n + dt/2 k_2, k_3 = T(y_p),
    y_p = y_n + dt k_3, k_4 = T(y_p);   y_{n+1} = y_n + dt (k_1 + 2 k_2 + 2 k_3 + k_4) / 6,

accumulated stage by stage (y_{n+1} += b_j dt k_j, b = 1/6, 1/3, 1/3, 1/6).
"""
from __future__ import annotations

from typing import Callable, Sequence

#: Stage weights a_j of the provisional states and b_j of the accumulation.
RK4_A = (0.5, 0.5, 1.0)
RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def rk4_step(tendency: Callable[[Sequence], Sequence], state: Sequence, dt: float) -> list:
    """One RK4 step of the fields `state` under `tendency(fields) -> tendencies of the fields`."""
    new = [y.copy() for y in state]
    provisional = state
    for stage in range(4):
        k = tendency(provisional)
        for y_new, k_j in zip(new, k):
            y_new += (RK4_B[stage] * dt) * k_j
        if stage < 3:
            provisional = [y + (RK4_A[stage] * dt) * k_j for y, k_j in zip(state, k)]
    return new
