"""Adjoint modes: `atomic` (scatter from each forward output) and `deterministic` (gather into each
adjoint output through transposed connectivity; bitwise reproducible).

Selectable per call (`mode=`) and globally (`set_adjoint_mode`, or the `adjoint_mode` context).
"""
from __future__ import annotations

import contextlib

#: The adjoint modes, and the one used when neither a call nor `set_adjoint_mode` chooses.
ADJOINT_MODES = ("atomic", "deterministic")
DEFAULT_ADJOINT_MODE = "deterministic"
_default = {"mode": DEFAULT_ADJOINT_MODE}


def set_adjoint_mode(mode: str) -> None:
    """Set the adjoint mode used when an operator's `mode` argument is None."""
    _default["mode"] = resolve_mode(mode)


def get_adjoint_mode() -> str:
    return _default["mode"]


def resolve_mode(mode: str | None) -> str:
    """`mode`, or the global default when None; a clear error for anything else."""
    if mode is None:
        return _default["mode"]
    if mode not in ADJOINT_MODES:
        raise ValueError(f"adjoint mode: expected one of {ADJOINT_MODES}, got {mode!r}")
    return mode


@contextlib.contextmanager
def adjoint_mode(mode: str):
    """Use `mode` as the default adjoint mode inside a `with` block."""
    previous = _default["mode"]
    set_adjoint_mode(mode)
    try:
        yield
    finally:
        _default["mode"] = previous
