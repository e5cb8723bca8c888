"""Distributed versions of every registered operator (`meshops.registry.OPERATORS`).

On each rank, fields are local arrays (owned rows first, then halo rows; see `grids.decompose`).
With E the forward halo exchange of each input, A the local operator and P the restriction to
owned outputs (halo outputs set to zero):

    forward:  y = P A(E x)                          (owned rows exact: bitwise equal to one rank)
    tangent:  dy = P A'(E x; E dx)
    adjoint:  x_adj = E^T A^T(E x; P^T y_adj)       (P^T: y_adj with its halo rows zeroed;
                                                     E^T: halo values added into their owners)

so <y, y_adj> = <x, x_adj> with inner products over owned rows summed across ranks. The halo rows
of the inputs are overwritten by the forward exchange (owners' values); the halo rows of every
result are zero. The local adjoint runs in the requested mode (`atomic` or `deterministic`).
An operator needing `halo_depth` cell layers requires a decomposition at least that deep.

Overlap (forward and tangent on CuPy inputs): with n_owned the owned outputs and
n_int = `n_interior(range location, spec.halo_depth)` the leading ones that read owned inputs only
(interior-first order, see `grids.decompose`), the local operator runs in two row ranges:

    begin E x;  y[0:n_int] = A(x)[0:n_int]  (while the exchange is in flight)
    end E x;    y[n_int:n_owned] = A(E x)[n_int:n_owned]

which is the same arithmetic per output row as y = P A(E x). NumPy inputs, n_int = 0, operators
whose outputs lie at different locations and operators applied twice (not `single_pass`: their
first pass would run over all rows in both calls) take the plain path (exchange, then A).

Vertical operators (`ColumnOperator`) act on the columns at one horizontal location (cells by
default), which never cross ranks: E is the identity, nothing is exchanged, and only the owned
columns are computed (y = P A x, x_adj = P A^T P^T y_adj), with the same contract as above.
"""
from __future__ import annotations

import numpy as np

from meshops.device.backend import array_module
from meshops.registry import LOCATIONS, OPERATORS, OperatorSpec


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _single(results: tuple):
    return results[0] if len(results) == 1 else results


def _join(interior, boundary, n_int: int, n_owned: int):
    """Rows [0, n_int) of `interior` and [n_int, n_owned) of `boundary` in one array (the smaller
    part is copied into the larger)."""
    if n_int >= n_owned - n_int:
        interior[n_int:n_owned] = boundary[n_int:n_owned]
        return interior
    boundary[:n_int] = interior[:n_int]
    return boundary


class DistributedOperator:
    """`spec` applied on a rank's local mesh with halo exchanges (see module doc)."""

    def __init__(self, spec: OperatorSpec, halo):
        depth = halo.decomposition.halo_depth
        if spec.halo_depth > depth:
            raise ValueError(f"operator {spec.name!r} needs halo_depth >= {spec.halo_depth} cell "
                             f"layers, the decomposition has {depth}")
        self.spec, self.halo = spec, halo
        self.name = spec.name

    @property
    def mesh(self):
        return self.halo.mesh

    def _begin(self, fields, locations, transport):
        return [self.halo.begin(f, loc, transport=transport)
                for f, loc in zip(fields, locations, strict=True)]

    def _end(self, pending):
        return tuple(self.halo.end(p) for p in pending)

    def _exchange(self, fields, locations, transport):
        return self._end(self._begin(fields, locations, transport))

    def _exchange_adjoint(self, fields, locations, transport):
        """E^T: halo values added into their owners, halo rows zeroed."""
        pending = [self.halo.begin(f, loc, adjoint=True, transport=transport)
                   for f, loc in zip(fields, locations, strict=True)]
        return tuple(self.halo.end(p) for p in pending)

    def _n_owned(self, location: str) -> int:
        return self.halo.decomposition.n_owned(location)

    def _restrict(self, outputs, locations):
        for y, loc in zip(outputs, locations, strict=True):
            y[self._n_owned(loc):] = 0
        return outputs

    def _prepare(self, fields, locations, what):
        fields = tuple(fields)
        if len(fields) != len(locations):
            raise TypeError(f"{self.name}.{what}: expected {len(locations)} fields at "
                            f"{locations}, got {len(fields)}")
        return fields

    def n_interior(self) -> int:
        """Owned outputs computed while the exchange is in flight: those that read owned inputs
        only (0 for outputs at several locations and for operators that are not single-pass)."""
        if len(set(self.spec.range)) != 1 or not self.spec.single_pass:
            return 0
        return self.halo.decomposition.n_interior(self.spec.range[0], self.spec.halo_depth)

    def _split(self, fields) -> int:
        """Outputs to compute while the exchange is in flight (0: exchange, then compute)."""
        return 0 if array_module(*fields) is np else self.n_interior()

    def _apply(self, fn, fields, locations, transport):
        """fn(mesh, *E fields) on owned outputs: interior rows overlap the exchange (module doc)."""
        n_int = self._split(fields)
        if n_int == 0:
            return _as_tuple(fn(self.mesh, *self._exchange(fields, locations, transport)))
        pending = self._begin(fields, locations, transport)
        interior = _as_tuple(fn(self.mesh, *fields, rows=(0, n_int)))
        fields = self._end(pending)
        n_owned = self.halo.decomposition.n_owned(self.spec.range[0])
        if n_int == n_owned:
            return interior
        boundary = _as_tuple(fn(self.mesh, *fields, rows=(n_int, n_owned)))
        return tuple(_join(a, b, n_int, n_owned) for a, b in zip(interior, boundary, strict=True))

    def forward(self, *x, transport: str | None = None):
        """y = P A(E x): exchange the inputs (in place), apply the operator, zero halo outputs."""
        x = self._prepare(x, self.spec.domain, "forward")
        y = self._apply(self.spec.forward, x, self.spec.domain, transport)
        return _single(self._restrict(y, self.spec.range))

    __call__ = forward

    def tangent(self, *args, transport: str | None = None):
        """dy = P A'(E x; E dx) for a nonlinear operator: args = (*x, *dx)."""
        if self.spec.linear:
            return self.forward(*args, transport=transport)
        args = self._prepare(args, self.spec.domain * 2, "tangent")
        dy = self._apply(self.spec.tangent, args, self.spec.domain * 2, transport)
        return _single(self._restrict(dy, self.spec.range))

    def adjoint(self, *args, mode: str | None = None, transport: str | None = None):
        """x_adj = E^T A^T P^T y_adj; args = (*y_adj) (linear) or (*x, *y_adj) (nonlinear)."""
        spec = self.spec
        base = ()
        if not spec.linear:
            base = self._prepare(args[: len(spec.domain)], spec.domain, "adjoint")
            base = self._exchange(base, spec.domain, transport)
            args = args[len(spec.domain):]
        y = tuple(f if getattr(f.flags, "writeable", True) else f.copy()
                  for f in self._prepare(args, spec.range, "adjoint"))
        # P^T: the halo rows of y_adj are zeroed for the local adjoint and restored afterwards
        # (only the halo rows are copied, not the field).
        n_owned = [self._n_owned(loc) for loc in spec.range]
        halo_rows = [f[n:].copy() for f, n in zip(y, n_owned)]
        for f, n in zip(y, n_owned):
            f[n:] = 0
        try:
            x_adj = tuple(array_module(f).ascontiguousarray(f)
                          for f in _as_tuple(spec.adjoint(self.mesh, *base, *y, mode=mode)))
        finally:
            for f, n, rows in zip(y, n_owned, halo_rows):
                f[n:] = rows
        return _single(self._exchange_adjoint(x_adj, spec.domain, transport))


class ColumnOperator(DistributedOperator):
    """Vertical operator `spec` on a rank's local columns at horizontal location `columns` (module
    doc): no exchange; forward and tangent compute the owned columns only (`rows`), the adjoint
    zeroes the halo columns of its result. The inputs' halo rows are neither read for owned
    outputs nor changed. `transport` is taken for the signature the horizontal operators share;
    nothing is sent."""

    def __init__(self, spec: OperatorSpec, halo, columns: str = "cell"):
        if columns not in LOCATIONS:
            raise ValueError(f"operator {spec.name!r}: columns {columns!r}; expected one of {LOCATIONS}")
        self.spec, self.halo, self.name, self.columns = spec, halo, spec.name, columns

    def _n_owned(self, location: str) -> int:
        return self.halo.decomposition.n_owned(self.columns)

    def _prepare(self, fields, locations, what):
        fields = super()._prepare(fields, locations, what)
        n = self.halo.decomposition.n_local(self.columns)
        for i, f in enumerate(fields):
            if getattr(f, "shape", (None,))[0] != n:
                raise ValueError(f"{self.name}.{what}: input {i}: expected a field of the {n} local "
                                 f"{self.columns} columns of this rank, got shape {getattr(f, 'shape', None)}")
        return fields

    def n_interior(self) -> int:
        return 0

    def _exchange(self, fields, locations, transport):
        return tuple(fields)

    def _exchange_adjoint(self, fields, locations, transport):
        return self._restrict(fields, locations)

    def _apply(self, fn, fields, locations, transport):
        return _as_tuple(fn(self.mesh, *fields, rows=(0, self._n_owned(self.columns))))


def distributed(name: str, halo, *, columns: str | None = None) -> DistributedOperator:
    """The distributed version of the registered operator `name` on `halo`'s decomposition; a
    vertical operator acts on the columns at `columns` (default "cell"; no exchange), a horizontal
    one takes no `columns`."""
    if name not in OPERATORS:
        raise KeyError(f"operator {name!r} is not registered; registered: {sorted(OPERATORS)}")
    spec = OPERATORS[name]
    if spec.vertical:
        return ColumnOperator(spec, halo, "cell" if columns is None else columns)
    if columns is not None:
        raise ValueError(f"operator {name!r}: columns={columns!r}; only a vertical operator acts on "
                         f"columns (its locations are {spec.domain} -> {spec.range})")
    return DistributedOperator(spec, halo)


def distributed_operators(halo, *, columns: str = "cell") -> dict[str, DistributedOperator]:
    """{name: DistributedOperator} for every registered operator whose halo depth fits, the
    vertical ones on the columns at `columns` (`ColumnOperator`)."""
    depth = halo.decomposition.halo_depth
    return {name: (ColumnOperator(spec, halo, columns) if spec.vertical else DistributedOperator(spec, halo))
            for name, spec in OPERATORS.items() if spec.halo_depth <= depth}
