"""Interior-first local meshes and the overlapped distributed forward: interior outputs read no
halo row, the overlap path (forced on NumPy) is bitwise equal to one rank, the distributed local
meshes carry the boundary distances."""
import dataclasses

import numpy as np
import pytest

from grids.decompose import LOCATIONS, local_mesh
from meshops.parallel.distributed import DistributedOperator, _join
from meshops.parallel.halo import HaloExchange
from meshops.registry import OPERATORS

from .conftest import decomposition, global_field, scatter


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _rank_rng(comm, rng):
    """A stream of this rank's own (the shared `rng` stays in step across ranks)."""
    return np.random.default_rng([int(rng.integers(2**32)), comm.Get_rank()])


def _depth(spec):
    return max(2, spec.halo_depth)


def _refill_halo(x, n_owned, rng):
    y = x.copy()
    y[n_owned:] = rng.standard_normal(y[n_owned:].shape)
    return y


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_interior_outputs_read_no_halo_row(comm, mesh, rng, name, nlev):
    spec = OPERATORS[name]
    d = decomposition(comm, mesh, halo_depth=_depth(spec))
    n_int = d.n_interior(spec.range[0], spec.halo_depth)
    if mesh.nCells > 600:        # the icosahedral mesh: every rank of 1-4 has interior outputs
        assert n_int > 0, (name, comm.Get_rank())
    local_rng = _rank_rng(comm, rng)
    tail = () if nlev is None else (nlev,)

    def fresh(loc):
        return local_rng.standard_normal((d.n_local(loc),) + tail)

    nargs = 1 if spec.linear else 2
    x = [fresh(loc) for loc in spec.domain * nargs]
    other = [_refill_halo(a, d.n_owned(loc), local_rng)
             for a, loc in zip(x, spec.domain * nargs, strict=True)]
    fn = spec.forward if spec.linear else spec.tangent
    if not spec.linear:
        nonlinear = [spec.forward(d.mesh, *args[: len(spec.domain)]) for args in (x, other)]
        for a, b in zip(*map(_tuple, nonlinear), strict=True):
            assert np.array_equal(a[:n_int], b[:n_int]), (name, "forward")
    for a, b in zip(_tuple(fn(d.mesh, *x)), _tuple(fn(d.mesh, *other)), strict=True):
        assert np.array_equal(a[:n_int], b[:n_int]), name


class _Overlapped(DistributedOperator):
    """Takes the overlap path on NumPy arrays too."""

    def _split(self, fields) -> int:
        return self.n_interior()


def _rows_honoured(fn, calls, n_owned):
    """`fn` with `rows=`: rows outside [first, last) are NaN (unspecified, as on the GPU); each call
    records its rows and whether the halo rows of its inputs were already exchanged (finite)."""
    def wrapped(mesh, *x, rows=None):
        calls.append((rows, all(np.isfinite(a[n:]).all() for a, n in zip(x, n_owned))))
        y = _tuple(fn(mesh, *x))
        if rows is not None:
            for a in y:
                a[: rows[0]] = np.nan
                a[rows[1]:] = np.nan
        return y[0] if len(y) == 1 else y
    return wrapped


@pytest.mark.parametrize("nlev", [None, 3])
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_overlap_path_bitwise_equals_one_rank(comm, mesh, rng, name, nlev):
    spec = OPERATORS[name]
    halo = HaloExchange(decomposition(comm, mesh, halo_depth=_depth(spec)), comm)
    d = halo.decomposition
    calls = []
    n_owned = [d.n_owned(loc) for loc in spec.domain * 2]
    probe = dataclasses.replace(
        spec, forward=_rows_honoured(spec.forward, calls, n_owned),
        tangent=None if spec.linear else _rows_honoured(spec.tangent, calls, n_owned))
    op = _Overlapped(probe, halo)
    n_int, n_out = op.n_interior(), d.n_owned(spec.range[0])
    xg = [global_field(mesh, loc, rng, nlev) for loc in spec.domain]
    def local(fields, locations):
        return [scatter(d, loc, g) for loc, g in zip(locations, fields, strict=True)]

    runs = [(spec.forward(mesh, *xg), lambda: op.forward(*local(xg, spec.domain)))]
    if not spec.linear:
        dxg = [global_field(mesh, loc, rng, nlev) for loc in spec.domain]
        runs.append((spec.tangent(mesh, *xg, *dxg),
                     lambda: op.tangent(*local(xg + dxg, spec.domain * 2))))
    for reference, run in runs:
        calls.clear()
        result = run()
        for ref, res, loc in zip(_tuple(reference), _tuple(result), spec.range, strict=True):
            owned = d.local.l2g[loc][: d.n_owned(loc)]
            assert np.array_equal(res[: d.n_owned(loc)], ref[owned]), (name, loc)
            assert not res[d.n_owned(loc):].any(), (name, loc)
        if n_int == 0:
            assert calls == [(None, True)], calls
            continue
        in_flight = comm.Get_size() == 1          # one rank: no halo rows to wait for
        expected = [((0, n_int), in_flight)] + ([((n_int, n_out), True)] if n_int < n_out else [])
        assert calls == expected, (name, calls)


def test_join_copies_the_smaller_part():
    a, b = np.arange(10.0), -np.arange(10.0)
    assert np.array_equal(_join(a.copy(), b.copy(), 7, 9)[:9], np.r_[a[:7], b[7:9]])
    assert np.array_equal(_join(a.copy(), b.copy(), 2, 9)[:9], np.r_[a[:2], b[2:9]])


@pytest.mark.parametrize("halo_depth", [1, 2])
def test_distributed_local_meshes_match_local_mesh(comm, mesh, halo_depth):
    """What root sent equals this rank's `local_mesh` built from the global mesh."""
    d = decomposition(comm, mesh, halo_depth=halo_depth)
    owner = np.zeros(mesh.nCells, np.int64)
    for r, gids in enumerate(comm.allgather(d.local.l2g["cell"][: d.n_owned("cell")])):
        owner[gids] = r
    ref = local_mesh(mesh, owner, comm.Get_rank(), halo_depth)
    for loc in LOCATIONS:
        for kind in ("l2g", "owner", "layer_offsets", "boundary_distance", "interior_counts"):
            assert np.array_equal(getattr(d.local, kind)[loc], getattr(ref, kind)[loc]), (kind, loc)
        L = d.local.boundary_distance[loc]
        assert L.size == d.n_owned(loc) and (np.diff(L.astype(int)) <= 0).all(), loc
