"""Laplacians (scalar, vector, del4) and Perot reconstruction: spherical-harmonic eigenvalues,
discrete identities (constants in the kernel, area-weighted symmetry, the energy identity that fixes
the sign of the curl part), reconstruction of solid-body rotation, and measured convergence orders
on icosahedral meshes of levels 2..5 (5 Lloyd iterations); the reconstruction kernels
(meshops/cuda/reconstruct.cu) compiled for the host against the NumPy reference."""
import numpy as np
import pytest

import meshops
from grids.decompose import local_mesh
from grids.icosahedral import generate_icosahedral
from grids.partition import partition_sfc
from meshops.operators.curl import curl_e2v
from meshops.operators.divergence import div_e2c
from meshops.modes import ADJOINT_MODES
from meshops.registry import OPERATORS
from meshops.analytic import (cell_points, dot, edge_normals, edge_points, mesh_spacing, orders,
                              random_rotation, rel_l2, rel_linf, solid_body, spherical_harmonic)

from tests.dot_products import assert_adjoint_identity

from .conftest import random_field
from .host_harness import HostArray, host, host_fixtures
from .test_linear_operators import _close, any_mesh, rank_mesh  # noqa: F401

LEVELS = (2, 3, 4, 5)
OPS = ("laplacian_c2c", "vector_laplacian_e2e", "del4_c2c", "del4_e2e", "reconstruct_e2c",
       "reconstruct_zonal_meridional_e2c")


@pytest.fixture(scope="module")
def ladder():
    """Icosahedral meshes of levels 2..5 (162 .. 10242 cells), 5 Lloyd iterations."""
    return [generate_icosahedral(level, lloyd_iterations=5) for level in LEVELS]


def _report(label, spacings, errors):
    errs = " ".join(f"{e:.2e}" for e in errors)
    rates = " ".join(f"{r:.2f}" for r in orders(spacings, errors))
    print(f"{label}: errors {errs} orders {rates}")


# -- scalar Laplacian -----------------------------------------------------------------------------

# Measured relative l2 errors at level 5 (l = 1..4): 2.7e-4, 1.1e-3, 1.5e-3, 2.2e-3; orders
# level 3 -> 5 from 1.6 (l = 1) to 1.9 (l = 4). The max-norm error stalls near 7e-3 for l >= 2
# (the mesh is not exactly centroidal), which is why the bound is on the l2 norm.
L2_BOUND_LEVEL5 = {1: 5e-4, 2: 2e-3, 3: 3e-3, 4: 4e-3}


@pytest.mark.parametrize("degree", [1, 2, 3, 4])
def test_scalar_laplacian_of_spherical_harmonics(degree, ladder, rng):
    f = spherical_harmonic(degree, random_rotation(rng)).value
    errors, spacings = [], []
    for mesh in ladder:
        phi = f(cell_points(mesh))
        exact = -degree * (degree + 1) / mesh.sphere_radius**2 * phi
        errors.append(rel_l2(mesh.areaCell, meshops.laplacian_c2c(mesh, phi), exact))
        spacings.append(mesh_spacing(mesh))
    _report(f"laplacian_c2c Y_{degree} l2", spacings, errors)
    assert np.all(np.diff(errors) < 0), errors
    assert errors[-1] <= L2_BOUND_LEVEL5[degree], errors
    rate = np.log(errors[1] / errors[3]) / np.log(spacings[1] / spacings[3])
    assert rate >= 1.4, (rate, errors)


def _rayleigh(weights, x, y):
    return float(np.sum(weights * x * y) / np.sum(weights * x * x))


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_laplacian_eigenvalues_converge_at_second_order(degree, ladder, rng):
    """Rayleigh quotients <f, L f> / <f, f> (area-weighted) of Y_l tend to -l(l+1)/a^2 at order 2,
    for the scalar Laplacian, del4_c2c (eigenvalue squared) and the vector Laplacian on rotational,
    divergent and mixed fields u = p x grad Y + c grad Y (measured orders 1.97..2.01)."""
    Q = random_rotation(rng)
    Y = spherical_harmonic(degree, Q)
    f, grad = Y.value, Y.grad
    mix = rng.uniform(0.3, 1.0)
    flows = {"rotational": lambda p: np.cross(p, grad(p)), "divergent": grad,
             "mixed": lambda p: np.cross(p, grad(p)) + mix * grad(p)}
    errors = {k: [] for k in ("laplacian_c2c", "del4_c2c", *flows)}
    spacings = []
    for mesh in ladder:
        lam = -degree * (degree + 1) / mesh.sphere_radius**2
        phi = f(cell_points(mesh))
        errors["laplacian_c2c"].append(
            abs(_rayleigh(mesh.areaCell, phi, meshops.laplacian_c2c(mesh, phi)) / lam - 1))
        errors["del4_c2c"].append(
            abs(_rayleigh(mesh.areaCell, phi, meshops.del4_c2c(mesh, phi)) / lam**2 - 1))
        W = mesh.dcEdge * mesh.dvEdge
        for name, flow in flows.items():
            u = dot(flow(edge_points(mesh)), edge_normals(mesh))
            errors[name].append(abs(_rayleigh(W, u, meshops.vector_laplacian_e2e(mesh, u)) / lam - 1))
        spacings.append(mesh_spacing(mesh))
    for name, err in errors.items():
        _report(f"Rayleigh quotient {name} Y_{degree}", spacings, err)
        rates = orders(spacings, err)
        assert rates[1:].min() >= 1.8, (name, rates, err)
        assert err[-1] <= 4e-3, (name, err)


def test_constants_are_in_the_kernel_of_the_scalar_laplacian(mesh, rng):
    c = rng.uniform(-5, 5, size=3)
    phi = np.ones((mesh.nCells, 3)) * c
    assert np.array_equal(meshops.laplacian_c2c(mesh, phi), np.zeros_like(phi))
    assert np.array_equal(meshops.del4_c2c(mesh, phi), np.zeros_like(phi))
    # and the global integral of the Laplacian of any field vanishes
    phi = random_field(mesh, "cell", rng, nlev=2)
    lap = meshops.laplacian_c2c(mesh, phi)
    total = (mesh.areaCell[:, None] * lap).sum(axis=0)
    scale = (mesh.areaCell[:, None] * np.abs(lap)).sum(axis=0)
    assert np.all(np.abs(total) <= 1e-13 * scale), (total, scale)


# -- structure: Euclidean adjoints vs area-weighted symmetry ----------------------------------------

@pytest.mark.parametrize("mode", ADJOINT_MODES)
def test_laplacian_adjoints_are_area_weighted_transposes(mesh, mode, rng):
    """A Lap symmetric (A = areaCell) gives Lap^T g = A Lap(g / A); W vlap symmetric (W = dcEdge dvEdge)
    gives vlap^T g = W vlap(g / W). The Euclidean adjoint differs from the forward itself."""
    A, W = mesh.areaCell[:, None], (mesh.dcEdge * mesh.dvEdge)[:, None]
    g = random_field(mesh, "cell", rng, nlev=3)
    adj = meshops.laplacian_c2c_adj(mesh, g, mode=mode)
    expected = A * meshops.laplacian_c2c(mesh, g / A)
    assert np.abs(adj - expected).max() <= 1e-12 * np.abs(expected).max()
    assert np.abs(adj - meshops.laplacian_c2c(mesh, g)).max() > 1e-3 * np.abs(adj).max()
    g = random_field(mesh, "edge", rng, nlev=3)
    adj = meshops.vector_laplacian_e2e_adj(mesh, g, mode=mode)
    expected = W * meshops.vector_laplacian_e2e(mesh, g / W)
    assert np.abs(adj - expected).max() <= 1e-12 * np.abs(expected).max()
    adj4 = meshops.del4_e2e_adj(mesh, g, mode=mode)
    expected4 = W * meshops.del4_e2e(mesh, g / W)
    assert np.abs(adj4 - expected4).max() <= 1e-12 * np.abs(expected4).max()


def test_vector_laplacian_energy_identity(mesh, rng):
    """sum_e dcEdge dvEdge u del2u = -(sum_c areaCell div^2 + sum_v areaTriangle vort^2): the discrete
    Green identity of grad(div) + k x grad(vort). A wrong sign on the curl part breaks it."""
    u = random_field(mesh, "edge", rng, nlev=2)
    lhs = ((mesh.dcEdge * mesh.dvEdge)[:, None] * u * meshops.vector_laplacian_e2e(mesh, u)).sum(axis=0)
    rhs = -((mesh.areaCell[:, None] * div_e2c(mesh, u) ** 2).sum(axis=0)
            + (mesh.areaTriangle[:, None] * curl_e2v(mesh, u) ** 2).sum(axis=0))
    assert np.all(np.abs(lhs - rhs) <= 1e-12 * np.abs(rhs)), (lhs, rhs)


# -- reconstruction ---------------------------------------------------------------------------------

def _solid_body_case(mesh, Q, speed):
    a = mesh.sphere_radius
    U = solid_body(Q[2] * speed / a)
    u = dot(U(edge_points(mesh) * a), edge_normals(mesh))
    return u, U(cell_points(mesh) * a)


def test_reconstruction_of_solid_body_rotation_converges_at_second_order(ladder, rng):
    """Measured: max error 1.1e-2, 2.7e-3, 7.0e-4, 1.8e-4 of the peak speed on levels 2..5 (orders
    2.03, 1.94, 1.93); l2 orders 2.0."""
    Q, speed = random_rotation(rng), rng.uniform(10, 50)
    linf, l2, spacings = [], [], []
    for mesh in ladder:
        u, exact = _solid_body_case(mesh, Q, speed)
        R = np.stack(meshops.reconstruct_e2c(mesh, u), axis=1)
        assert np.abs(dot(R, cell_points(mesh))).max() <= 1e-13 * speed  # tangent to the sphere
        linf.append(rel_linf(R, exact))
        l2.append(rel_l2(mesh.areaCell, R, exact))
        spacings.append(mesh_spacing(mesh))
    _report("reconstruct_e2c solid body linf", spacings, linf)
    _report("reconstruct_e2c solid body l2", spacings, l2)
    assert linf[-1] <= 3e-4 and l2[-1] <= 3e-4, (linf, l2)
    assert orders(spacings, linf).min() >= 1.8 and orders(spacings, l2).min() >= 1.9


def test_reconstruction_of_a_general_flow(ladder, rng):
    """u = p x grad Y_3 + c grad Y_3: measured l2 errors 6.3e-2 .. 1.2e-3, orders 1.96, 1.92, 1.84."""
    grad = spherical_harmonic(3, random_rotation(rng)).grad
    c = rng.uniform(0.3, 1.0)
    flow = lambda p: np.cross(p, grad(p)) + c * grad(p)  # noqa: E731
    l2, spacings = [], []
    for mesh in ladder:
        u = dot(flow(edge_points(mesh)), edge_normals(mesh))
        R = np.stack(meshops.reconstruct_e2c(mesh, u), axis=1)
        l2.append(rel_l2(mesh.areaCell, R, flow(cell_points(mesh))))
        spacings.append(mesh_spacing(mesh))
    _report("reconstruct_e2c Y_3 flow l2", spacings, l2)
    assert l2[-1] <= 2.5e-3 and orders(spacings, l2).min() >= 1.7, l2


def test_zonal_meridional_reconstruction(mesh, rng):
    """Zonal/meridional components are the projections of the Cartesian reconstruction on MPAS's
    east/north vectors; for a rotation about the polar axis, meridional ~ 0 and zonal ~ u0 cos(lat)."""
    u0 = rng.uniform(10, 50)
    a = mesh.sphere_radius
    u = dot(solid_body([0, 0, u0 / a])(edge_points(mesh) * a), edge_normals(mesh))
    zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(mesh, u)
    bound = 3e-2 if mesh.nCells <= 162 else 1e-2   # measured 1.1e-2 (x1.162), 2.7e-3 (level 3)
    assert np.abs(zonal - u0 * np.cos(mesh.latCell)).max() <= bound * u0
    assert np.abs(meridional).max() <= bound * u0
    Q = random_rotation(rng)
    u, _ = _solid_body_case(mesh, Q, u0)
    X, Y, Z = meshops.reconstruct_e2c(mesh, u)
    lat, lon = mesh.latCell, mesh.lonCell
    east = -np.sin(lon) * X + np.cos(lon) * Y
    north = -np.sin(lat) * np.cos(lon) * X - np.sin(lat) * np.sin(lon) * Y + np.cos(lat) * Z
    zonal, meridional = meshops.reconstruct_zonal_meridional_e2c(mesh, u)
    assert np.abs(zonal - east).max() <= 1e-13 * u0 and np.abs(meridional - north).max() <= 1e-13 * u0


# -- adjoint modes and local meshes -----------------------------------------------------------------

@pytest.fixture(scope="module")
def rank0_mesh(mpas_mesh):
    """Rank 0 of 3 of the x1.162 mesh with one halo layer (missing neighbours are -1)."""
    return local_mesh(mpas_mesh, partition_sfc(mpas_mesh, 3), 0, halo_depth=1).mesh


@pytest.mark.parametrize("name", OPS)
def test_atomic_and_deterministic_adjoints_agree_on_a_local_mesh(name, rank0_mesh, rng):
    spec = OPERATORS[name]
    y = tuple(random_field(rank0_mesh, loc, rng, nlev=3) for loc in spec.range)
    x = tuple(random_field(rank0_mesh, loc, rng, nlev=3) for loc in spec.domain)
    a = spec.adjoint(rank0_mesh, *y, mode="atomic")
    d = spec.adjoint(rank0_mesh, *y, mode="deterministic")
    assert np.abs(a - d).max() <= 1e-13 * np.abs(a).max()
    fx = spec.forward(rank0_mesh, *x)
    fx = fx if isinstance(fx, tuple) else (fx,)
    assert_adjoint_identity(fx, y, x, (d,))


# -- the reconstruction kernels compiled for the host ----------------------------------------------

RECONSTRUCTIONS = ("reconstruct_e2c", "reconstruct_zonal_meridional_e2c")


host_kernels, on_host = host_fixtures("reconstruct")      # see host_harness


@pytest.fixture
def reconstruct_on_host(on_host):
    """The reconstruct.cu kernels launched, in order."""
    return on_host["reconstruct"]


@pytest.mark.parametrize("nlev", [3, 4])     # one level per thread; vector lanes of 2 or 4 levels
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("name", RECONSTRUCTIONS)
def test_reconstruction_kernels_on_host(name, dtype, tol, nlev, any_mesh, reconstruct_on_host, rng):
    """Forward (all rows and a row range) and both adjoint modes of the CuPy path, run on the host,
    equal the NumPy reference."""
    spec = OPERATORS[name]
    mesh = any_mesh.replace()          # its own DeviceMesh (tables built anew)
    u = random_field(mesh, "edge", rng, nlev=nlev, dtype=dtype)
    gs = tuple(random_field(mesh, loc, rng, nlev=nlev, dtype=dtype) for loc in spec.range)
    reference = spec.forward(mesh, u)
    pairs = list(zip(reference, spec.forward(mesh, host(u)), strict=True))
    for mode in ADJOINT_MODES:
        pairs.append((spec.adjoint(mesh, *gs, mode=mode),
                      spec.adjoint(mesh, *(host(g) for g in gs), mode=mode)))
    kind = "xyz" if name == "reconstruct_e2c" else "zm"
    assert reconstruct_on_host == [f"reconstruct_{kind}_e2c", f"reconstruct_{kind}_e2c_adj_atomic",
                                   f"reconstruct_{kind}_e2c_adj_gather"]
    for ref, res in pairs:
        assert isinstance(res, HostArray), name
        _close(np.asarray(res, dtype=np.float64), ref, rtol=tol)
    first, last = mesh.nCells // 3, 2 * mesh.nCells // 3
    for ref, res in zip(reference, spec.forward(mesh, host(u), rows=(first, last)), strict=True):
        _close(np.asarray(res[first:last], dtype=np.float64), ref[first:last], rtol=tol)
