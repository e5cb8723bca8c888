"""The Runge-Kutta scheme of every sweep: classical RK4 with one provisional state, as MPAS's
shallow-water core steps it,

    k_1 = T(y_n), y_p = y_n + dt/2 k_1, k_2 = T(y_p), y_p = y_n + dt/2 k_2, k_3 = T(y_p),
    y_p = y_n + dt k_3, k_4 = T(y_p);   y_{n+1} = y_n + dt (k_1 + 2 k_2 + 2 k_3 + k_4) / 6,

accumulated stage by stage (y_{n+1} += b_j dt k_j). Its coefficients live here alone; the stepper
(`framework.stepper`) hands each stage its `Update` (forward and tangent-linear) or `AdjointUpdate`.
"""
from __future__ import annotations

from typing import NamedTuple

#: The Butcher tableau (diagonal: stage j+1 reads y_n + a_j dt k_j alone): a_j of the provisional
#: states and b_j of the accumulation.
RK4_A = (0.5, 0.5, 1.0)
RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


class Update(NamedTuple):
    """How a stage applies its tendency k of a row: new = (new if `accumulate` else old) +
    new_coef * k, and if `provisional` next = old + next_coef * k (new_coef = b_j dt, next_coef =
    a_j dt of stage j)."""
    new_coef: float
    next_coef: float
    accumulate: bool
    provisional: bool

    def arguments(self) -> dict:
        """The update as the fused kernels' scalar arguments."""
        return dict(newCoef=self.new_coef, nextCoef=self.next_coef,
                    accumulate=int(self.accumulate), provisional=int(self.provisional))


class AdjointUpdate(NamedTuple):
    """The bookkeeping of stage j's adjoint, from the adjoint p of its provisional state: y_adj +=
    p (with `start`, the step's last stage: y_adj = new_adj + p), and with `next` the adjoint
    tendency of stage j - 1, k_adj = b_coef * new_adj + a_coef * p (b_coef = b_{j-1} dt, a_coef =
    a_{j-1} dt)."""
    b_coef: float
    a_coef: float
    next: bool
    start: bool

    def arguments(self) -> dict:
        """The bookkeeping as the fused adjoint kernels' scalar arguments (rk = 2 with `start`,
        else 1)."""
        return dict(rk=2 if self.start else 1, bCoef=self.b_coef, aCoef=self.a_coef,
                    next=int(self.next))


class AdjointRK4(NamedTuple):
    """A stage's `AdjointUpdate` with the arrays it updates, as a model's fused adjoint kernels
    apply it: y_adj and new_adj are tuples of the model's prognostic arrays (one of each per
    prognostic field, in the model's order)."""
    y_adj: tuple
    new_adj: tuple
    update: AdjointUpdate

    def arguments(self) -> dict:
        return self.update.arguments()


def updates(dt: float) -> list:
    """The `Update` of each stage of a step of `dt`, in stage order."""
    last = len(RK4_B) - 1
    return [Update(b * dt, 0.0 if j == last else RK4_A[j] * dt, j > 0, j < last)
            for j, b in enumerate(RK4_B)]


def adjoint_updates(dt: float) -> list:
    """The `AdjointUpdate` of each stage of a step of `dt`, in stage order (the adjoint runs them
    in reverse)."""
    last = len(RK4_B) - 1
    return [AdjointUpdate(RK4_B[j - 1] * dt if j else 0.0, RK4_A[j - 1] * dt if j else 0.0, j > 0,
                          j == last) for j in range(len(RK4_B))]
