"""The Laplacian kernels (meshops/cuda/laplacian.cu) compiled for the host: every launch of the CuPy
path of laplacian_c2c, vector_laplacian_e2e and del4_* (forward, both adjoint modes; the atomic
mode runs the composed kernels of the other families) against the NumPy compositions, on the
x1.162 mesh, a generated mesh and a rank's local mesh (missing neighbours); forwards on a range of
output rows. The vector Laplacian runs as a cell pass, a vertex pass and an edge pass, and from
sm_90's composed_from_bytes of levels per edge (float64 nlev 3 and 4 here, float32 nlev 4) as one gather
over the composed stencil, its adjoint too in both modes."""
import numpy as np
import pytest

import meshops
from grids.decompose import local_mesh
from grids.partition import partition_sfc
from meshops.device.kernels import GATHER
from meshops.device.tuning import SM_90
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS

from .conftest import random_field
from .host_harness import HostArray, host, host_fixtures
from .test_linear_operators import _close, any_mesh, rank_mesh  # noqa: F401

LAPLACIANS = ("laplacian_c2c", "vector_laplacian_e2e", "del4_c2c", "del4_e2e")
NLEVS = [None, 3, 4]  # one level per thread; lanes of 2 or 4 levels


def _passes(name, nlev, dtype, adjoint=None):
    """laplacian.cu launches of one forward or adjoint (`adjoint`: its mode) of `name` at `nlev`
    levels: the atomic adjoints launch only the composed stencil's gather."""
    composed = (nlev or 1) * np.dtype(dtype).itemsize >= SM_90.composed_from_bytes
    scalar = "laplacian_c2c_adj_gather" if adjoint else "laplacian_c2c"
    vector = [GATHER] if composed else [GATHER, GATHER, "vector_laplacian_e2e"]
    if adjoint == "atomic":
        scalar, vector = None, [GATHER] if composed else []
    passes = {"laplacian_c2c": [scalar], "del4_c2c": 2 * [scalar], "vector_laplacian_e2e": vector,
              "del4_e2e": 2 * vector}[name]
    return [p for p in passes if p is not None]


# laplacian.cu and the families whose kernels the atomic adjoints compose, run on the host.
host_kernels, on_host = host_fixtures("laplacian", "divergence", "gradient", "curl")


@pytest.fixture
def laplacian_on_host(on_host):
    """The laplacian.cu kernels launched, in order."""
    return on_host["laplacian"]


@pytest.mark.parametrize("nlev", NLEVS)
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("name", LAPLACIANS)
def test_fused_laplacians_on_host(name, dtype, tol, nlev, any_mesh, laplacian_on_host, rng):
    spec = OPERATORS[name]
    mesh = any_mesh.replace()
    x = random_field(mesh, spec.domain[0], rng, nlev=nlev, dtype=dtype)
    y = random_field(mesh, spec.range[0], rng, nlev=nlev, dtype=dtype)
    pairs = [(spec.forward(mesh, x), spec.forward(mesh, host(x)))]
    assert laplacian_on_host == _passes(name, nlev, dtype)
    for mode in ADJOINT_MODES:
        del laplacian_on_host[:]
        pairs.append((spec.adjoint(mesh, y, mode=mode), spec.adjoint(mesh, host(y), mode=mode)))
        assert laplacian_on_host == _passes(name, nlev, dtype, adjoint=mode), mode
    for reference, result in pairs:
        assert isinstance(result, HostArray), name
        _close(np.asarray(result, dtype=np.float64), reference, rtol=tol)


def test_inconsistent_signs_are_named(mpas_mesh, laplacian_on_host, rng):
    sign = mpas_mesh.edgeSignOnCell.copy()
    sign[4, 1] = -sign[4, 1]
    bad = mpas_mesh.replace(edgeSignOnCell=sign)
    with pytest.raises(ValueError, match=r"edgeSignOnCell\[4, 1\]"):
        meshops.laplacian_c2c(bad, host(random_field(bad, "cell", rng)))


@pytest.mark.parametrize("nlev", NLEVS)
@pytest.mark.parametrize("name", LAPLACIANS)
def test_forward_rows_on_host(name, nlev, any_mesh, laplacian_on_host, rng):
    """rows=(first, last): the output rows in range equal the NumPy reference (vector_laplacian_e2e:
    the cell and vertex passes cover every cell and vertex; del4_*: the first Laplacian covers every
    row, so rows next to the range's ends are right too)."""
    spec = OPERATORS[name]
    mesh = any_mesh.replace()
    x = random_field(mesh, spec.domain[0], rng, nlev=nlev)
    n = x.shape[0]
    first, last = n // 3, 2 * n // 3
    result = spec.forward(mesh, host(x), rows=(first, last))
    assert laplacian_on_host == _passes(name, nlev, x.dtype)
    _close(np.asarray(result[first:last]), spec.forward(mesh, x)[first:last])



@pytest.mark.parametrize("nlev", NLEVS)
@pytest.mark.parametrize("name", ["vector_laplacian_e2e", "del4_e2e"])
def test_rank_mesh_forward_is_bitwise_the_global_one(name, nlev, mpas_mesh, laplacian_on_host, rng):
    """On a rank's local mesh (its own numbering, halo of 2 layers) the owned edges equal the global
    forward bit for bit, composed stencil included: its slots follow the mesh's connectivity order,
    not the entity numbering."""
    local = local_mesh(mpas_mesh, partition_sfc(mpas_mesh, 3), 1, halo_depth=2)
    u = random_field(mpas_mesh, "edge", rng, nlev=nlev)
    owned = local.l2g["edge"][: local.n_owned("edge")]
    spec = OPERATORS[name]
    reference = np.asarray(spec.forward(mpas_mesh.replace(), host(u)))
    result = np.asarray(spec.forward(local.mesh.replace(), host(u[local.l2g["edge"]])))
    assert np.array_equal(result[: owned.size], reference[owned])


def test_the_composed_stencil_is_the_same_in_blocks_on_threads(mpas_mesh, monkeypatch):
    """The composed stencil's tables built in blocks of 97 rows on 3 threads equal those built in
    one block on one thread, bit for bit (blocks of different widths padded alike); its rows are
    A = Gc Dv - Gv Zc applied to unit vectors; the forward's tables build without the transpose's
    coefficients (a forward run reads none)."""
    import grids.geometry
    from meshops.device.tables import HostTables

    forward = HostTables(mpas_mesh)
    forward.build(["edgesOnEdgeDel2"])
    assert "coefDel2" in forward.names() and "coefDel2T" not in forward.names()
    monkeypatch.setenv(grids.geometry.THREADS_ENV, "1")
    whole = HostTables(mpas_mesh)
    whole.build(["edgesOnEdgeDel2", "coefDel2T"])
    monkeypatch.setattr(grids.geometry, "CHUNK", 97)
    monkeypatch.setenv(grids.geometry.THREADS_ENV, "3")
    blocks = HostTables(mpas_mesh)
    blocks.build(["edgesOnEdgeDel2", "coefDel2T"])
    for name in ("edgesOnEdgeDel2", "coefDel2", "coefDel2T"):
        a, b = whole[name], blocks[name]
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
    nbr, coef = whole["edgesOnEdgeDel2"], whole["coefDel2"]
    rows = np.random.default_rng().choice(mpas_mesh.nEdges, 20, replace=False)
    for e in rows:
        unit = np.zeros(mpas_mesh.nEdges)
        present = nbr[e] >= 0
        for e2, c in zip(nbr[e][present], coef[e][present]):
            unit[:] = 0.0
            unit[e2] = 1.0
            assert np.isclose(meshops.vector_laplacian_e2e(mpas_mesh, unit)[e], c, rtol=1e-12,
                              atol=1e-12 * np.abs(coef[e]).max())
