"""What the autodiff adapters (`meshops.torch`, `meshops.jax`) share: the maps of each registered
operator with the locations of their inputs and outputs, and the check of the fields they are given.

Each operator X has maps `forward` (X), `adjoint` (X_adj) and, when nonlinear, `tangent` (X_tl):
    linear:     forward: domain -> range;   adjoint: range -> domain
    nonlinear:  forward: domain -> range;   tangent: domain + domain -> range (base x, direction dx);
                adjoint: domain + range -> domain (base x, cotangent g)
"""
from __future__ import annotations

from meshops.device.mesh import check_mesh
from meshops.device.tables import SIZE_OF
from meshops.registry import OPERATORS

SUFFIX = {"forward": "", "adjoint": "_adj", "tangent": "_tl"}


def spec_of(adapter: str, name: str):
    """The registered operator `name`, or a KeyError listing the registered ones."""
    if name not in OPERATORS or OPERATORS[name].vertical:
        wrapped = sorted(n for n, s in OPERATORS.items() if not s.vertical)
        raise KeyError(f"{adapter}: no operator {name!r} among the horizontal operators of "
                       f"meshops.registry.OPERATORS it wraps (vertical operators change the level "
                       f"count and are not wrapped yet; wrapped: {', '.join(wrapped)})")
    return OPERATORS[name]


def maps(spec) -> dict:
    """{kind: (input locations, output locations)} of the maps of `spec`."""
    d, r = spec.domain, spec.range
    if spec.linear:
        return {"forward": (d, r), "adjoint": (r, d)}
    return {"forward": (d, r), "tangent": (d + d, r), "adjoint": (d + r, d)}


def compute(spec, kind: str, mesh, arrays, mode: str) -> tuple:
    """Map `kind` of `spec` on NumPy or CuPy arrays; its outputs as a tuple."""
    if kind == "adjoint":
        out = spec.adjoint(mesh, *arrays, mode=mode)
    else:
        out = (spec.forward if kind == "forward" else spec.tangent)(mesh, *arrays)
    return out if isinstance(out, tuple) else (out,)


def public_names(spec) -> dict:
    """{"X", "X_adj"[, "X_tl"]: kind} for operator `spec`."""
    return {f"{spec.name}{SUFFIX[kind]}": kind for kind in maps(spec)}


def rows(mesh, locations) -> tuple:
    """The row counts of fields at `locations` on `mesh`."""
    return tuple(int(getattr(mesh, SIZE_OF[loc])) for loc in locations)


def check_fields(where: str, mesh, locations, fields, *, is_array, float_dtypes, place=lambda x: "") -> None:
    """`fields` are float fields of shape (n,) or (n, nlev) at `locations` of `mesh`, all with the
    levels, dtype and `place` (a description of its device) of the first; a TypeError or
    ValueError naming the input, the bad value and what was expected otherwise."""
    check_mesh(mesh)
    if len(fields) != len(locations):
        raise TypeError(f"{where}: expected {len(locations)} fields ({', '.join(locations)}), "
                        f"got {len(fields)}")
    first = fields[0] if fields else None
    for i, (x, loc, n) in enumerate(zip(fields, locations, rows(mesh, locations))):
        what = f"a {loc} field of shape ({n},) or ({n}, nlev)"
        if not is_array(x):
            raise TypeError(f"{where}: input {i}: expected {what}, got {type(x).__name__}")
        if x.dtype not in float_dtypes:
            raise TypeError(f"{where}: input {i}: expected a float32 or float64 {loc} field, "
                            f"got dtype {x.dtype}")
        if x.ndim not in (1, 2) or x.shape[0] != n:
            raise ValueError(f"{where}: input {i}: expected {what}, got shape {tuple(x.shape)}")
        if (tuple(x.shape[1:]), x.dtype, place(x)) != (tuple(first.shape[1:]), first.dtype, place(first)):
            raise ValueError(f"{where}: input {i}: levels {tuple(x.shape[1:])}, dtype {x.dtype}"
                             f"{place(x)}; expected those of input 0: {tuple(first.shape[1:])}, "
                             f"{first.dtype}{place(first)}")


def install_public(namespace: dict, make) -> list[str]:
    """namespace[X], [X_adj], [X_tl] = make(name, kind) for every registered operator; their names."""
    names = []
    for spec in OPERATORS.values():
        if spec.vertical:           # not wrapped yet (spec_of)
            continue
        for attr, kind in public_names(spec).items():
            namespace[attr] = make(spec.name, kind)
            names.append(attr)
    return names


def public_attribute(namespace: dict, make, module: str, attr: str):
    """A module's `__getattr__`: the public function `attr` of an operator registered after the module
    was imported, made and kept in `namespace` on first access."""
    for spec in OPERATORS.values():
        kind = None if spec.vertical else public_names(spec).get(attr)
        if kind is not None:
            namespace[attr] = fn = make(spec.name, kind)
            return fn
    raise AttributeError(f"module {module!r} has no attribute {attr!r}")
