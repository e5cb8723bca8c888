"""Gather adjoints through int32 positions into the forward coefficient table (the "lean" tables).

A transposed stencil (`connectivity.transpose`) lists, for each input entity, the (row, slot)
pairs of the forward stencil that read it. Held as positions p = row * S + slot into the forward
table (S slots per row, row-major, -1 pads), it replaces the transposed copy of the coefficients:
`stencil_gather_positions` (stencil.cuh) reads coef[p] and the field at row p / S, in the same
order, so the sums are bitwise those of the gather over the transposed table.
"""
from __future__ import annotations

import numpy as np

from meshops.device.kernels import GATHER_POSITIONS


def positions(rows, slots, width: int) -> np.ndarray:
    """rows * width + slots where rows >= 0, else -1 (int64)."""
    rows = np.asarray(rows)
    return np.where(rows >= 0, rows * width + np.asarray(slots), -1)


def gather(family, n: int, pos, coef, x, out, *, rows=None) -> None:
    """out[t, k] = sum_m coef.flat[p] * x[p // S, k], p = pos[t, m] >= 0 (S = coef.shape[1]), for
    rows [first, last) of the n output rows: `GATHER_POSITIONS`, which `family` must list."""
    family.launch(GATHER_POSITIONS, n, pos=pos, coef=coef, x=x, out=out, S=coef.shape[1],
                  ST=pos.shape[1], slotStride=1, rows=rows)
