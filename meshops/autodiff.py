"""What the autodiff adapters (`meshops.torch`, `meshops.jax`) share: the maps of each registered
operator with the locations of their inputs and outputs, the shapes of their outputs and the check
of the fields they are given.

Each operator X has maps `forward` (X), `adjoint` (X_adj) and, when nonlinear, `tangent` (X_tl):
    linear:     forward: domain -> range;   adjoint: range -> domain
    nonlinear:  forward: domain -> range;   tangent: domain + domain -> range (base x, direction dx);
                adjoint: domain + range -> domain (base x, cotangent g)

Field shapes: at a horizontal location (n,) or (n, nlev), n its row count on the mesh and nlev
the same for every input and output; at a vertical location (columns at any one horizontal
location, n = nCells, nEdges or nVertices, the same for every input and output; N = nVertLevels
the same for all): "layer" (n, N), "interface" (n, N + 1), "column" (n,).
"""
from __future__ import annotations

from meshops.device.backend import article
from meshops.device.mesh import check_mesh
from meshops.device.tables import SIZE_OF
from meshops.registry import OPERATORS, VERTICAL

SUFFIX = {"forward": "", "adjoint": "_adj", "tangent": "_tl"}


def spec_of(adapter: str, name: str):
    """The registered operator `name`, or a KeyError listing the registered ones."""
    if name not in OPERATORS:
        raise KeyError(f"{adapter}: no operator {name!r} among the operators of meshops.registry.OPERATORS "
                       f"it wraps ({', '.join(sorted(OPERATORS))})")
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
    """The row counts of fields at horizontal `locations` on `mesh`."""
    return tuple(int(getattr(mesh, SIZE_OF[loc])) for loc in locations)


def _column_shape(location: str, n: int, N: int) -> tuple:
    return {"layer": (n, N), "interface": (n, N + 1), "column": (n,)}[location]


def _layers(locations, shapes) -> int:
    """nVertLevels of vertical fields at `locations` with `shapes` (0 when all are columns)."""
    for loc, shape in zip(locations, shapes):
        if loc != "column":
            return int(shape[1]) - (loc == "interface")
    return 0


def output_rows(spec, kind: str, mesh, shapes) -> tuple:
    """The row counts of map `kind`'s outputs on `mesh` for inputs of `shapes` (a vertical
    operator's outputs have its inputs' columns)."""
    outs = maps(spec)[kind][1]
    return (int(shapes[0][0]),) * len(outs) if spec.vertical else rows(mesh, outs)


def output_shapes(spec, kind: str, rows, shapes) -> tuple:
    """The shapes of map `kind`'s outputs of row counts `rows` for inputs of `shapes`."""
    ins, outs = maps(spec)[kind]
    if not spec.vertical:
        return tuple((int(n),) + tuple(shapes[0][1:]) for n in rows)
    N = _layers(ins, shapes)
    return tuple(_column_shape(loc, int(n), N) for loc, n in zip(outs, rows))


def check_fields(where: str, mesh, locations, fields, *, is_array, float_dtypes, place=lambda x: "") -> None:
    """`fields` are float fields at `locations` of `mesh` of the shapes in the module docstring,
    all with the dtype and `place` (a description of its device) of the first; a TypeError or
    ValueError naming the input, the bad value and what was expected otherwise."""
    check_mesh(mesh)
    if len(fields) != len(locations):
        raise TypeError(f"{where}: expected {len(locations)} fields ({', '.join(locations)}), "
                        f"got {len(fields)}")
    first = fields[0] if fields else None
    columns = {"n": None, "N": None}     # a vertical operator's columns and levels, from its inputs
    for i, (x, loc) in enumerate(zip(fields, locations)):
        shape_ok, what = (_column_field(mesh, loc, x, columns) if loc in VERTICAL
                          else _horizontal_field(mesh, loc, x, first))
        if not is_array(x):
            raise TypeError(f"{where}: input {i}: expected {what}, got {type(x).__name__}")
        if x.dtype not in float_dtypes:
            raise TypeError(f"{where}: input {i}: expected a float32 or float64 {loc} field, "
                            f"got dtype {x.dtype}")
        if not shape_ok():
            raise ValueError(f"{where}: input {i}: expected {what}, got shape {tuple(x.shape)}")
        if _kind_of(loc, x, place) != _kind_of(loc, first, place):
            raise ValueError(f"{where}: input {i}: {_kind_of(loc, x, place)}; expected those of input 0: "
                             f"{_kind_of(loc, first, place)}")


def _kind_of(loc: str, x, place) -> str:
    """What every input of a call shares: the dtype, the device and (horizontal) the levels."""
    levels = "" if loc in VERTICAL else f"levels {tuple(x.shape[1:])}, "
    return f"{levels}dtype {x.dtype}{place(x)}"


def _horizontal_field(mesh, loc: str, x, first):
    """(shape check, what is expected) of field x at horizontal location `loc`."""
    (n,) = rows(mesh, (loc,))
    return (lambda: x.ndim in (1, 2) and x.shape[0] == n), f"{article(loc)} field of shape ({n},) or ({n}, nlev)"


def _column_field(mesh, loc: str, x, columns: dict):
    """(shape check, what is expected) of field x at vertical location `loc`; the check records in
    `columns` the column count n and the layer count N that the first fields set."""
    n, N = columns["n"], columns["N"]
    levels = {"layer": "nVertLevels", "interface": "nVertLevels + 1"}.get(loc)
    if n is None:
        sizes = ", ".join(f"{size}={k}" for size, k in zip(SIZE_OF.values(), rows(mesh, SIZE_OF)))
        what = f"{article(loc)} field of shape (n{', ' + levels if levels else ','}), n one of {sizes}"
    elif levels and N is None:
        what = f"{article(loc)} field of shape ({n}, {levels}) (input 0's columns)"
    else:
        what = f"{article(loc)} field of shape {_column_shape(loc, n, N)} (input 0's columns and levels)"

    def ok() -> bool:
        if n is not None and (N is not None or not levels):     # both known: the exact shape
            return tuple(x.shape) == _column_shape(loc, n, N or 0)
        allowed = rows(mesh, SIZE_OF) if n is None else (n,)
        fewest = 2 if loc == "interface" else 1
        if x.ndim != (2 if levels else 1) or x.shape[0] not in allowed or (levels and x.shape[1] < fewest):
            return False
        columns["n"] = int(x.shape[0])
        if levels:
            columns["N"] = _layers((loc,), (x.shape,))
        return True

    return ok, what


def install_public(namespace: dict, make) -> list[str]:
    """namespace[X], [X_adj], [X_tl] = make(name, kind) for every registered operator; their names."""
    names = []
    for spec in OPERATORS.values():
        for attr, kind in public_names(spec).items():
            namespace[attr] = make(spec.name, kind)
            names.append(attr)
    return names


def public_attribute(namespace: dict, make, module: str, attr: str):
    """A module's `__getattr__`: the public function `attr` of an operator registered after the module
    was imported, made and kept in `namespace` on first access."""
    for spec in OPERATORS.values():
        kind = public_names(spec).get(attr)
        if kind is not None:
            namespace[attr] = fn = make(spec.name, kind)
            return fn
    raise AttributeError(f"module {module!r} has no attribute {attr!r}")
