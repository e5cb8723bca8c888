"""Every registered operator, distributed: bitwise forward equality with one rank, and global
dot-product tests of the distributed adjoint (both modes) over owned entries summed across ranks;
the vertical ones on the columns at cells, edges and vertices, without a message sent."""
import numpy as np
import pytest

from adjoint.verification import dot_product_test
from meshops.parallel.distributed import distributed
from meshops.parallel.halo import HaloExchange
from meshops.modes import ADJOINT_MODES
from meshops.parallel.comm import allreduce_sum
from meshops.registry import OPERATORS

from .conftest import decomposition, global_columns, global_field, scatter

TOLERANCE = {np.float64: 1e-12}


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _halo(comm, mesh, spec):
    return HaloExchange(decomposition(comm, mesh, halo_depth=max(2, spec.halo_depth)), comm)


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_forward_bitwise_equals_one_rank(comm, mesh, rng, name, nlev):
    spec = OPERATORS[name]
    halo = _halo(comm, mesh, spec)
    d, op = halo.decomposition, distributed(name, halo)
    xg = [global_field(mesh, loc, rng, nlev) for loc in spec.domain]
    reference = _tuple(spec.forward(mesh, *xg))
    result = _tuple(op.forward(*(scatter(d, loc, g) for loc, g in zip(spec.domain, xg))))
    for ref, res, loc in zip(reference, result, spec.range, strict=True):
        owned = d.local.l2g[loc][: d.n_owned(loc)]
        assert np.array_equal(res[: d.n_owned(loc)], ref[owned]), (name, loc)
        assert not res[d.n_owned(loc):].any()
    if not spec.linear:
        dxg = [global_field(mesh, loc, rng, nlev) for loc in spec.domain]
        reference = _tuple(spec.tangent(mesh, *xg, *dxg))
        local = [scatter(d, loc, g) for loc, g in zip(spec.domain * 2, xg + dxg)]
        for ref, res, loc in zip(reference, _tuple(op.tangent(*local)), spec.range, strict=True):
            owned = d.local.l2g[loc][: d.n_owned(loc)]
            assert np.array_equal(res[: d.n_owned(loc)], ref[owned]), (name, "tangent", loc)


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_distributed_dot_product(comm, mesh, rng, name, mode, nlev, dtype=np.float64):
    spec = OPERATORS[name]
    halo = _halo(comm, mesh, spec)
    d, op = halo.decomposition, distributed(name, halo)

    def local(loc):
        return scatter(d, loc, global_field(mesh, loc, rng, nlev, dtype), fill=0)

    x = tuple(local(loc) for loc in spec.domain)
    y = tuple(local(loc) for loc in spec.range)
    if spec.linear:
        forward = lambda *xs: op.forward(*(a.copy() for a in xs))
        adjoint = lambda *ys: op.adjoint(*ys, mode=mode)
    else:
        base = tuple(local(loc) for loc in spec.domain)
        forward = lambda *dxs: op.tangent(*base, *(a.copy() for a in dxs))
        adjoint = lambda *ys: op.adjoint(*base, *ys, mode=mode)
    locs = {"domain": spec.domain, "range": spec.range}

    def restrict(arrays, side):
        return tuple(a[: d.n_owned(loc)] for a, loc in zip(arrays, locs[side], strict=True))

    result = dot_product_test(forward, adjoint, x, y, restrict=restrict, allreduce=allreduce_sum(comm))
    assert result.relative_error <= TOLERANCE[dtype], result


@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_adjoint_ignores_and_keeps_halo_rows_of_its_input(comm, mesh, rng, name):
    """P^T: halo rows of y_adj do not contribute, and the caller's y_adj is left as it was."""
    spec = OPERATORS[name]
    halo = _halo(comm, mesh, spec)
    d, op = halo.decomposition, distributed(name, halo)
    base = tuple(scatter(d, loc, global_field(mesh, loc, rng, 3)) for loc in spec.domain)
    y = tuple(scatter(d, loc, global_field(mesh, loc, rng, 3)) for loc in spec.range)
    for f in y:
        f[:] = rng.standard_normal(f.shape)          # random halo rows as well
    y_before = tuple(f.copy() for f in y)
    y_zero_halo = tuple(f.copy() for f in y)
    for f, loc in zip(y_zero_halo, spec.range):
        f[d.n_owned(loc):] = 0
    nonlinear = () if spec.linear else tuple(b.copy() for b in base)
    result = _tuple(op.adjoint(*nonlinear, *y, mode="deterministic"))
    nonlinear = () if spec.linear else tuple(b.copy() for b in base)
    reference = _tuple(op.adjoint(*nonlinear, *y_zero_halo, mode="deterministic"))
    for res, ref in zip(result, reference, strict=True):
        assert np.array_equal(res, ref), name
    for f, f0 in zip(y, y_before, strict=True):
        assert np.array_equal(f, f0), name


def test_operator_deeper_than_the_halo_is_refused(comm, mesh):
    from meshops.parallel.distributed import DistributedOperator

    spec = OPERATORS["div_e2c"]
    deep = type(spec)(spec.name, spec.forward, spec.adjoint, spec.domain, spec.range, None, 3)
    with pytest.raises(ValueError, match="needs halo_depth >= 3"):
        DistributedOperator(deep, HaloExchange(decomposition(comm, mesh), comm))


# -- vertical operators: columns never cross ranks ------------------------------------------------

VERTICAL_NAMES = sorted(n for n, s in OPERATORS.items() if s.vertical)


@pytest.mark.parametrize("columns", ["cell", "edge", "vertex"])
@pytest.mark.parametrize("name", VERTICAL_NAMES)
def test_column_operator_equals_one_rank_without_messages(comm, mesh, rng, name, columns):
    """Forward and tangent: owned columns bitwise those of one rank, halo columns zero, inputs (their
    halo rows NaN: never exchanged) unchanged; forward, tangent and adjoint send nothing."""
    spec = OPERATORS[name]
    halo = _halo(comm, mesh, spec)
    d, op = halo.decomposition, distributed(name, halo, columns=columns)
    n_owned, owned = d.n_owned(columns), d.local.l2g[columns][: d.n_owned(columns)]
    xg = global_columns(mesh, spec.domain * 2, rng, columns, 4, spec)
    runs = [(op.forward, spec.forward, xg[: len(spec.domain)])]
    if not spec.linear:
        runs.append((op.tangent, spec.tangent, xg))
    before = halo.stats.snapshot()
    for distributed_map, one_rank, fields in runs:
        local = [scatter(d, columns, g) for g in fields]
        copies = [a.copy() for a in local]
        for res, ref in zip(_tuple(distributed_map(*local)), _tuple(one_rank(mesh, *fields)), strict=True):
            assert np.array_equal(res[:n_owned], ref[owned]), name
            assert not res[n_owned:].any(), name
        for a, b in zip(local, copies, strict=True):
            assert np.array_equal(a, b, equal_nan=True), name
    base = [] if spec.linear else [scatter(d, columns, g) for g in xg[: len(spec.domain)]]
    y = [scatter(d, columns, g, fill=0) for g in global_columns(mesh, spec.range, rng, columns, 4)]
    x_adj = _tuple(op.adjoint(*base, *y))
    assert all(np.isfinite(a).all() and not a[n_owned:].any() for a in x_adj), name
    assert halo.stats - before == type(before)(), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("name", VERTICAL_NAMES)
def test_column_operator_dot_product(comm, mesh, rng, name, mode, dtype):
    """<P A x, y> = <x, P A^T P^T y> over owned columns summed across ranks (random halo rows in
    x and y, NaN ones in a base state: they take no part)."""
    spec = OPERATORS[name]
    halo = _halo(comm, mesh, spec)
    d, op = halo.decomposition, distributed(name, halo, columns="edge")
    n_owned = d.n_owned("edge")

    def local(locations, base=None, fill=np.nan):
        return tuple(scatter(d, "edge", g, fill) for g in global_columns(mesh, locations, rng, "edge", 5, base, dtype))

    x, y = local(spec.domain), local(spec.range)
    for f in x + y:
        f[n_owned:] = rng.standard_normal(f[n_owned:].shape)
    if spec.linear:
        forward, adjoint = op.forward, (lambda *ys: op.adjoint(*ys, mode=mode))
    else:
        base = local(spec.domain, spec)
        forward = lambda *dxs: op.tangent(*base, *dxs)  # noqa: E731
        adjoint = lambda *ys: op.adjoint(*base, *ys, mode=mode)  # noqa: E731

    def restrict(arrays, side):
        return tuple(a[:n_owned] for a in arrays)

    result = dot_product_test(forward, adjoint, x, y, restrict=restrict, allreduce=allreduce_sum(comm))
    assert result.relative_error <= {np.float32: 1e-5, np.float64: 1e-12}[dtype], result


def test_column_operator_refuses_fields_of_other_columns(comm, mesh):
    halo = _halo(comm, mesh, OPERATORS["avg_l2i"])
    d = halo.decomposition
    op = distributed("avg_l2i", halo, columns="vertex")
    with pytest.raises(ValueError, match=rf"avg_l2i.forward: input 0: expected a field of the {d.n_local('vertex')} "
                                         r"local vertex columns of this rank, got shape"):
        op.forward(np.ones((d.n_local("cell"), 3)))
    with pytest.raises(ValueError, match="columns='edge'; only a vertical operator acts on columns"):
        distributed("div_e2c", halo, columns="edge")
    with pytest.raises(ValueError, match="columns 'layer'; expected one of"):
        distributed("avg_l2i", halo, columns="layer")
