"""GPU state exchange under MPI (one GPU per rank), NCCL and staging through host memory: a mixed
state in one message per neighbour, its adjoint's dot test, the chain of operators after one
exchange bitwise equal to the global chain and its adjoint, scatter/gather of CuPy fields.
Skipped without CuPy and a CUDA device."""
import numpy as np
import pytest

from adjoint.verification import dot_product_test
from meshops.modes import ADJOINT_MODES
from meshops.operators.divergence import div_e2c, div_e2c_adj
from meshops.operators.gradient import grad_c2e, grad_c2e_adj
from meshops.operators.pv_flux import pv_flux_e2e, pv_flux_e2e_adj, pv_flux_e2e_tl
from meshops.parallel.comm import allreduce_sum, select_device
from meshops.parallel.layers import layers_needed
from meshops.parallel.scatter_gather import gather_field, scatter_field
from meshops.parallel.state import FieldSpec, StateExchange

from .conftest import skip_nccl_on_shared_gpu, decomposition, global_field, scatter
from .test_state_exchange import CHAIN, MIXED, _global_state, _peers_with_rows, _rank_rng

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]
TRANSPORTS = ["nccl", "staging"]
_EXCHANGES = {}


def _exchange(comm, mesh, fields, transport, key):
    key = (id(mesh), transport, key)
    if key not in _EXCHANGES:
        select_device(comm)
        skip_nccl_on_shared_gpu(comm, transport)
        d = decomposition(comm, mesh, halo_depth=layers_needed(CHAIN))
        _EXCHANGES[key] = StateExchange(d, fields, comm, transport=transport)
    return _EXCHANGES[key]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_gpu_state_exchange_contents_messages_and_adjoint_dot(comm, mesh, rng, transport):
    import cupy

    ex = _exchange(comm, mesh, MIXED, transport, "mixed")
    d = ex.decomposition
    assert ex.transport_name(cupy) == ("local" if comm.Get_size() == 1 else transport)
    g = _global_state(mesh, MIXED, rng)
    state = {n: cupy.asarray(scatter(d, MIXED[n][0], a, fill=0)) for n, a in g.items()}
    before = ex.stats.snapshot()
    ex.exchange(state)
    assert (ex.stats - before).messages_sent == len(_peers_with_rows(d, MIXED, "send"))
    for name, spec in MIXED.items():
        assert np.array_equal(cupy.asnumpy(state[name]), g[name][d.local.l2g[spec[0]]]), name

    floats = {n: s for n, s in MIXED.items() if np.dtype(s[2]) == np.float64}
    fx = _exchange(comm, mesh, floats, transport, "floats")
    names, locs = list(floats), [floats[n][0] for n in floats]
    local_rng = _rank_rng(comm, rng)
    x = tuple(cupy.asarray(local_rng.standard_normal((d.n_local(l),) + FieldSpec.of(floats[n]).tail))
              for n, l in zip(names, locs))
    y = tuple(cupy.asarray(local_rng.standard_normal(a.shape)) for a in x)

    def run(method, arrays):
        s = {n: a.copy() for n, a in zip(names, arrays)}
        method(s)
        return tuple(s[n] for n in names)

    result = dot_product_test(
        lambda *a: run(fx.exchange, a), lambda *b: run(fx.exchange_adjoint, b), x, y,
        restrict=lambda arrs, side: arrs if side == "range" else tuple(
            a[: d.n_owned(l)] for a, l in zip(arrs, locs)),
        allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_gpu_chain_after_one_exchange_and_its_adjoint(comm, mesh, rng, transport, mode):
    import cupy

    fields = {"F": ("edge", 4), "q": ("edge", 4)}
    ex = _exchange(comm, mesh, fields, transport, "chain")
    d = ex.decomposition
    n = d.n_owned("edge")
    Fg, qg = global_field(mesh, "edge", rng, 4), global_field(mesh, "edge", rng, 4)
    base = {"F": cupy.asarray(scatter(d, "edge", Fg)), "q": cupy.asarray(scatter(d, "edge", qg))}
    ex.exchange(base)
    G = grad_c2e(d.mesh, div_e2c(d.mesh, base["F"]))
    y = pv_flux_e2e(d.mesh, G, base["q"])
    Fc, qc = cupy.asarray(Fg), cupy.asarray(qg)
    ref = cupy.asnumpy(pv_flux_e2e(mesh, grad_c2e(mesh, div_e2c(mesh, Fc)), qc))
    assert np.array_equal(cupy.asnumpy(y)[:n], ref[d.local.l2g["edge"][:n]])

    local_rng = _rank_rng(comm, rng)

    def fresh():
        return cupy.asarray(local_rng.standard_normal((d.n_local("edge"), 4)))

    def forward(dF, dq):
        s = {"F": dF.copy(), "q": dq.copy()}
        s["F"][n:] = np.nan
        s["q"][n:] = np.nan
        ex.exchange(s)
        dy = pv_flux_e2e_tl(d.mesh, G, base["q"], grad_c2e(d.mesh, div_e2c(d.mesh, s["F"])), s["q"])
        dy[n:] = 0
        return dy

    def adjoint(dy):
        dy = dy.copy()
        dy[n:] = 0
        G_adj, q_adj = pv_flux_e2e_adj(d.mesh, G, base["q"], dy, mode=mode)
        F_adj = div_e2c_adj(d.mesh, grad_c2e_adj(d.mesh, G_adj, mode=mode), mode=mode)
        s = {"F": cupy.ascontiguousarray(F_adj), "q": cupy.ascontiguousarray(q_adj)}
        ex.exchange_adjoint(s)
        return s["F"], s["q"]

    result = dot_product_test(forward, adjoint, (fresh(), fresh()), fresh(),
                              restrict=lambda arrs, side: tuple(a[:n] for a in arrs),
                              allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


@pytest.mark.parametrize("location", ["cell", "edge", "vertex"])
def test_gpu_scatter_gather_round_trip(comm, mesh, rng, location):
    import cupy

    select_device(comm)
    d = decomposition(comm, mesh)
    g = global_field(mesh, location, rng, 3, np.float32)
    x = scatter_field(d, comm, cupy.asarray(g) if comm.Get_rank() == 0 else None, location)
    assert isinstance(x, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(x), g[d.local.l2g[location]])
    back = gather_field(d, comm, x, location)
    if comm.Get_rank() == 0:
        assert isinstance(back, cupy.ndarray) and np.array_equal(cupy.asnumpy(back), g)
    else:
        assert back is None
