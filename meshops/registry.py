"""One registry of operators with their adjoints and the locations they map between.

Locations are horizontal, "cell", "edge" or "vertex" (fields (n,) or (n, nlev), the same nlev for
every input and output), or vertical (`VERTICAL`): "layer" (n, nVertLevels), "interface"
(n, nVertLevels + 1) and "column" (n,), one value per column. A vertical operator's locations are
all vertical: it acts on columns at any one horizontal location (cells, edges or vertices), each
column on its own, so it needs no halo and no exchange. A linear operator maps fields at `domain` (a tuple, one
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
#: The vertical locations (module docstring): levels are the last axis, counted from the surface up.
VERTICAL = ("layer", "interface", "column")


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
    sample: Callable | None = None

    @property
    def linear(self) -> bool:
        return self.tangent is None

    @property
    def vertical(self) -> bool:
        """Whether the operator acts on columns (its locations are `VERTICAL`)."""
        return self.domain[0] in VERTICAL


OPERATORS: dict[str, OperatorSpec] = {}


def register(name: str, *, forward: Callable, adjoint: Callable, domain, range, tangent=None,
             halo_depth: int = 1, single_pass: bool = True, quadratic: bool = False,
             sample: Callable | None = None) -> OperatorSpec:
    """Register an operator (linear when `tangent` is None) and return its spec. `sample(*x)`, for
    a nonlinear operator defined on part of its domain only (positive pressures), maps fields of
    independent standard-normal entries to a base state where it is defined (what the generic
    tests draw); None: any fields are."""
    domain = (domain,) if isinstance(domain, str) else tuple(domain)
    range = (range,) if isinstance(range, str) else tuple(range)
    kinds = {loc in VERTICAL for loc in domain + range}
    for loc in domain + range:
        if loc not in LOCATIONS + VERTICAL:
            raise ValueError(f"operator {name!r}: location {loc!r} is not one of {LOCATIONS + VERTICAL}")
    if len(kinds) != 1:
        raise ValueError(f"operator {name!r}: locations {domain + range} mix horizontal {LOCATIONS} and "
                         f"vertical {VERTICAL} ones; expected one kind")
    if True in kinds and halo_depth != 0:
        raise ValueError(f"operator {name!r}: halo_depth {halo_depth}; expected 0 for a vertical "
                         f"operator (columns need no halo)")
    if quadratic and tangent is None:
        raise ValueError(f"operator {name!r}: quadratic=True needs a tangent (a linear operator is not quadratic)")
    if name in OPERATORS:
        raise ValueError(f"operator {name!r} is registered twice")
    spec = OperatorSpec(name, forward, adjoint, domain, range, tangent, halo_depth, single_pass, quadratic,
                        sample)
    OPERATORS[name] = spec
    return spec
