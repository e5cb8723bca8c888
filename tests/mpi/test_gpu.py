"""GPU halo exchange under MPI (one GPU per rank) with NCCL and with staging through host memory:
halo contents, the adjoint exchange's dot test, distributed operators bitwise equal to one rank
(the vertical ones on CuPy columns, without an exchange)."""
import numpy as np
import pytest

from adjoint.verification import dot_product_test
from meshops.parallel.distributed import distributed
from meshops.parallel.halo import HaloExchange
from meshops.modes import ADJOINT_MODES
from meshops.parallel.comm import allreduce_sum, select_device
from meshops.registry import OPERATORS

from .conftest import skip_nccl_on_shared_gpu, decomposition, global_columns, global_field, scatter

pytestmark = pytest.mark.gpu
TRANSPORTS = ["nccl", "staging"]
_HALOS = {}


def _halo(comm, mesh, name):
    key = (id(mesh), name)
    if key not in _HALOS:
        select_device(comm)
        skip_nccl_on_shared_gpu(comm, name)
        _HALOS[key] = HaloExchange(decomposition(comm, mesh), comm, transport=name)
    return _HALOS[key]


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_gpu_halo_contents_and_adjoint_dot(comm, mesh, rng, name):
    import cupy

    halo = _halo(comm, mesh, name)
    d = halo.decomposition
    assert halo.transport_name(cupy) == ("local" if comm.Get_size() == 1 else name)
    for location in ("cell", "edge", "vertex"):
        for nlev, dtype in [(None, np.float64), (5, np.float32)]:
            g = global_field(mesh, location, rng, nlev, dtype)
            x = cupy.asarray(scatter(d, location, g))
            halo.exchange(x, location)
            assert np.array_equal(cupy.asnumpy(x), g[d.local.l2g[location]]), (location, nlev)
        n_owned, n_local = d.n_owned(location), d.n_local(location)
        # per-rank draws from a stream of their own: the shared `rng` stays in step across ranks
        rank_rng = np.random.default_rng([int(rng.integers(2**32)), comm.Get_rank()])
        x = cupy.asarray(rank_rng.standard_normal((n_local, 3)))
        y = cupy.asarray(rank_rng.standard_normal((n_local, 3)))
        result = dot_product_test(
            lambda a: halo.exchange(a.copy(), location),
            lambda b: halo.exchange_adjoint(b.copy(), location),
            x, y, restrict=lambda arrs, side: arrs if side == "range" else tuple(a[:n_owned] for a in arrs),
            allreduce=allreduce_sum(comm))
        assert result.relative_error <= 1e-12, (location, result)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_gpu_distributed_operator(comm, mesh, rng, transport, name):
    import cupy

    spec = OPERATORS[name]
    halo = _halo(comm, mesh, transport)
    d, op = halo.decomposition, distributed(name, halo)
    xg = [global_field(mesh, loc, rng, 4) for loc in spec.domain]
    reference = _tuple(spec.forward(mesh, *(cupy.asarray(a) for a in xg)))
    result = _tuple(op.forward(*(cupy.asarray(scatter(d, loc, g)) for loc, g in zip(spec.domain, xg))))
    for ref, res, loc in zip(reference, result, spec.range, strict=True):
        owned = d.local.l2g[loc][: d.n_owned(loc)]
        assert np.array_equal(cupy.asnumpy(res)[: d.n_owned(loc)], cupy.asnumpy(ref)[owned]), loc

    def local(loc):
        return cupy.asarray(scatter(d, loc, global_field(mesh, loc, rng, 4), fill=0))

    base = () if spec.linear else tuple(local(loc) for loc in spec.domain)
    fwd = op.forward if spec.linear else (lambda *dx: op.tangent(*base, *dx))
    locs = {"domain": spec.domain, "range": spec.range}
    for mode in ADJOINT_MODES:
        x = tuple(local(loc) for loc in spec.domain)
        y = tuple(local(loc) for loc in spec.range)
        result = dot_product_test(
            lambda *xs: fwd(*(a.copy() for a in xs)), lambda *ys: op.adjoint(*base, *ys, mode=mode),
            x, y, allreduce=allreduce_sum(comm),
            restrict=lambda arrs, side: tuple(a[: d.n_owned(l)] for a, l in zip(arrs, locs[side])))
        assert result.relative_error <= 1e-12, (mode, result)


@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if s.vertical))
def test_gpu_column_operator(comm, mesh, rng, name):
    """CuPy columns: owned columns bitwise those of one rank, the global dot product, no message."""
    import cupy

    spec = OPERATORS[name]
    halo = _halo(comm, mesh, "staging")
    d, op = halo.decomposition, distributed(name, halo)
    n_owned, owned = d.n_owned("cell"), d.local.l2g["cell"][: d.n_owned("cell")]
    before = halo.stats.snapshot()
    xg = global_columns(mesh, spec.domain, rng, "cell", 6, spec)
    reference = _tuple(spec.forward(mesh, *(cupy.asarray(a) for a in xg)))
    result = _tuple(op.forward(*(cupy.asarray(scatter(d, "cell", g)) for g in xg)))
    for ref, res in zip(reference, result, strict=True):
        assert np.array_equal(cupy.asnumpy(res)[:n_owned], cupy.asnumpy(ref)[owned])

    def local(locations, base=None):
        return tuple(cupy.asarray(scatter(d, "cell", g)) for g in global_columns(mesh, locations, rng, "cell", 6, base))

    base = () if spec.linear else local(spec.domain, spec)
    fwd = op.forward if spec.linear else (lambda *dx: op.tangent(*base, *dx))
    for mode in ADJOINT_MODES:
        x, y = local(spec.domain), local(spec.range)
        result = dot_product_test(fwd, lambda *ys: op.adjoint(*base, *ys, mode=mode), x, y,
                                  allreduce=allreduce_sum(comm),
                                  restrict=lambda arrs, side: tuple(a[:n_owned] for a in arrs))
        assert result.relative_error <= 1e-12, (mode, result)
    assert halo.stats - before == type(before)()
