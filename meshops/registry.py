"""One registry of operators with their adjoints and the locations they map between.

Locations are "cell", "edge" or "vertex". A linear operator maps fields at `domain` (a tuple, one
location per input) to fields at `range` (one location per output) and registers `forward` and
`adjoint`. A nonlinear operator also registers its tangent-linear model `tangent` about a base
state; its `adjoint` is the adjoint of that tangent. A nonlinear operator that is a quadratic form,
N(x) = B(x, x) with B symmetric bilinear, says so (`quadratic=True`): its tangent T(x) dx = 2 B(x, dx)
is then symmetric, T(x) y = T(y) x, and its adjoint linear in the base state, which gives second
derivatives from the tangent and adjoint alone (the autodiff adapters `meshops.torch` and
`meshops.jax` use it). Generic tests (dot-product, Taylor, CuPy against
NumPy) and the distributed wrappers iterate over this registry.

Calling conventions (all operators):
    (`mesh`: a mesh, see `meshops.contracts.MeshLike`, or a `meshops.DeviceMesh`)
    linear:     forward(mesh, *x) -> y or tuple(y);           adjoint(mesh, *y_adj, mode=None) -> x_adj or tuple
    nonlinear:  forward(mesh, *x) -> y;   tangent(mesh, *x, *dx) -> dy;
                adjoint(mesh, *x, *dy_adj, mode=None) -> dx_adj or tuple
Inner product of every adjoint: the plain Euclidean sum over owned entries (and levels).
`halo_depth` is the number of cell layers of halo the forward needs for its owned outputs to be
exact on a local mesh. Forwards and tangents take `rows=(first, last)` (output rows to compute, on
either backend; the other rows of the output are unspecified); `single_pass` says the forward computes each output row from the inputs directly, so a
row range costs only its rows (False for operators applied twice, whose first pass runs in full).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

LOCATIONS = ("cell", "edge", "vertex")


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    forward: Callable
    adjoint: Callable
    domain: tuple[str, ...]
    range: tuple[str, ...]
    tangent: Callable | None = None
    halo_depth: int = 1
    single_pass: bool = True
    quadratic: bool = False

    @property
    def linear(self) -> bool:
        return self.tangent is None


OPERATORS: dict[str, OperatorSpec] = {}


def register(name: str, *, forward: Callable, adjoint: Callable, domain, range, tangent=None,
             halo_depth: int = 1, single_pass: bool = True, quadratic: bool = False) -> OperatorSpec:
    """Register an operator (linear when `tangent` is None) and return its spec."""
    domain = (domain,) if isinstance(domain, str) else tuple(domain)
    range = (range,) if isinstance(range, str) else tuple(range)
    for loc in domain + range:
        if loc not in LOCATIONS:
            raise ValueError(f"operator {name!r}: location {loc!r} is not one of {LOCATIONS}")
    if quadratic and tangent is None:
        raise ValueError(f"operator {name!r}: quadratic=True needs a tangent (a linear operator is not quadratic)")
    if name in OPERATORS:
        raise ValueError(f"operator {name!r} is registered twice")
    spec = OperatorSpec(name, forward, adjoint, domain, range, tangent, halo_depth, single_pass, quadratic)
    OPERATORS[name] = spec
    return spec
