"""Terms of one's own of every target (`Physics.extra_terms`, swm.terms) on every path: a relaxation
of the surface height (tend_h), a drag scaled by the thickness (tend_u) and a second pv_edge
correction beside APVM, with base fields of its own under the name of one of APVM's.

Each changes the forward tendencies by exactly its contribution; the tangent-linear and adjoint of
the tendencies and of the RK4 step pass the dot test (1e-12), the step's tangent-linear the Taylor
test; on a rank's local mesh of the physics' halo depth (its chains) the owned rows equal one
process's bitwise. On the host (the CUDA sources compiled with g++) and on a GPU (marked gpu) the
fused tendencies equal the operator path's (bitwise on the same device code), the fused step, its
tangent-linear and adjoint (both modes) equal the operator path's to round-off, and the fused
tangent-linear and adjoint steps pass the dot test."""
from dataclasses import replace

import numpy as np
import pytest

import meshops
from adjoint import dot_product_test, tangent_taylor_test
from grids.decompose import local_mesh
from grids.partition import partition_sfc
from swm import terms
from swm.distribution import halo_depth
from swm.fused import fused_tendencies
from swm.model import Model
from framework.stepper import TendencyStages, rk4_step_adj, rk4_step_tl, step
from swm.tendencies import Physics, diagnostics, tendencies, tendencies_adj, tendencies_tl

from tests.adjoint.states import DT, adjoint_inputs, directions, perturbed_state
from tests.dot_products import assert_adjoint_identity
from tests.meshops.host_harness import host, host_fixtures
from tests.swm.test_fused import FAMILIES, _rel, ico, ico4, mpas, random_state  # noqa: F401

host_kernels, on_host = host_fixtures(*FAMILIES, "shallow_water_adjoint", "shallow_water_tl")

TARGETS = ("tend_h", "tend_u", "pv_edge")
#: The physics the terms are added to: the fused terms alone, and with APVM and viscosity.
PHYSICS = {"plain": Physics(), "all": Physics(apvm=0.5, dt=DT, visc2=2e4, visc4=1e14)}


class SurfaceRelaxation:
    """tend_h -= rate (h + b - eta_ref): relaxation of the surface height towards eta_ref (cells,
    the mesh's rows); linear in (h, b)."""
    name, fused, target = "surface_relaxation", False, "tend_h"
    chains = ()

    def __init__(self, eta_ref, rate: float):
        self.eta_ref, self.rate = eta_ref, rate

    def active(self, physics) -> bool:
        return True

    def forward(self, mesh, h, u, b, d, physics):
        return -(self.rate * (h + b - self.eta_ref))

    def tangent(self, mesh, base, t, physics):
        dh, db = t["dh"], t["db"]
        return -(self.rate * (dh if db is None else dh + db))

    def adjoint(self, mesh, base, a, physics, mode):
        part = -(self.rate * a["tend_h"])
        a["h"] = part if a["h"] is None else a["h"] + part
        a["b"] = part.copy() if a["b"] is None else a["b"] + part


class ThicknessDrag:
    """tend_u -= rate (h_edge / depth) u: a drag scaled by the thickness on the edge (reads the
    diagnostic h_edge, its tangent dh_edge and adds to h_edge's adjoint)."""
    name, fused, target = "thickness_drag", False, "tend_u"
    chains = (("interp_c2e",),)

    def __init__(self, rate: float, depth: float = 5000.0):
        self.c = rate / depth

    def active(self, physics) -> bool:
        return True

    def forward(self, mesh, h, u, b, d, physics):
        return -(self.c * (d["h_edge"] * u))

    def tangent(self, mesh, base, t, physics):
        return -(self.c * (t["dh_edge"] * base["u"] + base["h_edge"] * t["du"]))

    def adjoint(self, mesh, base, a, physics, mode):
        s = -(self.c * a["tend_u"])
        a["h_edge"] = s * base["u"] if a["h_edge"] is None else a["h_edge"] + s * base["u"]
        a["u"] = s * base["h_edge"] if a["u"] is None else a["u"] + s * base["h_edge"]


class ThicknessSlopeCorrection:
    """pv_edge -= k v grad_c2e(h_smooth), v = tangential_e2e(u), h_smooth = interp_v2c(interp_c2v(h))
    (the thickness smoothed over the vertices): a second pv_edge correction, 3 halo layers deep,
    whose own base fields (`base`) carry the name of one of APVM's (grad_pv_cell) with another
    field: each term must get its own."""
    name, fused, target = "thickness_slope", False, "pv_edge"
    chains = (("tangential_e2e", "pv_flux_e2e"), ("interp_c2v", "interp_v2c", "grad_c2e", "pv_flux_e2e"))

    def __init__(self, k: float):
        self.k = k

    @staticmethod
    def slope(mesh, h):
        return meshops.grad_c2e(mesh, meshops.interp_v2c(mesh, meshops.interp_c2v(mesh, h)))

    def active(self, physics) -> bool:
        return True

    def forward(self, mesh, h, u, b, d, physics):
        return self.k * (meshops.tangential_e2e(mesh, u) * self.slope(mesh, h))

    def base(self, mesh, base, physics) -> dict:
        return dict(v=meshops.tangential_e2e(mesh, base["u"]), grad_pv_cell=self.slope(mesh, base["h"]))

    def tangent(self, mesh, base, t, physics):
        return self.k * (meshops.tangential_e2e(mesh, t["du"]) * base["grad_pv_cell"]
                         + base["v"] * self.slope(mesh, t["dh"]))

    def adjoint(self, mesh, base, a, physics, mode):
        s = -self.k * a["pv_edge"]
        u_adj = meshops.tangential_e2e_adj(mesh, s * base["grad_pv_cell"], mode=mode)
        h_adj = meshops.interp_c2v_adj(mesh, meshops.interp_v2c_adj(
            mesh, meshops.grad_c2e_adj(mesh, s * base["v"], mode=mode), mode=mode), mode=mode)
        a["u"] = u_adj if a["u"] is None else a["u"] + u_adj
        a["h"] = h_adj if a["h"] is None else a["h"] + h_adj


def make_term(target, eta):
    """A term of `target`; `eta` the surface height the tend_h term relaxes to."""
    if target == "tend_h":
        return SurfaceRelaxation(eta, 1e-4)
    if target == "tend_u":
        return ThicknessDrag(1e-4)
    return ThicknessSlopeCorrection(1e-8)


def eta_ref(mesh, rng):
    """A fresh random surface height (cells)."""
    return 5000.0 + 300.0 * rng.standard_normal(mesh.nCells)


def with_term(physics, term):
    return replace(PHYSICS[physics], extra_terms=(term,))


def reference_tendencies(mesh, h, u, b, f, physics, term):
    """The tendencies of PHYSICS[physics] with a tend_h or tend_u `term`'s forward added by hand
    (not through the terms' framework); with a pv_edge term, the framework's (its correction
    reached every path)."""
    if term.target == "pv_edge":
        return tendencies(mesh, h, u, b, f, with_term(physics, term))
    tend = list(tendencies(mesh, h, u, b, f, PHYSICS[physics]))
    d = diagnostics(mesh, h, u, f, PHYSICS[physics])
    tend[TARGETS.index(term.target)] += term.forward(mesh, h, u, b, d, PHYSICS[physics])
    return tuple(tend)


def reference_step(mesh, h, u, b, f, physics, term):
    """One RK4 step of `reference_tendencies` (framework.stepper on its tendencies alone)."""
    return step(TendencyStages(lambda y: reference_tendencies(mesh, *y, b, f, physics, term)),
                (h, u), DT)


# -- the operator path ----------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_the_tendencies_change_by_the_terms_contribution(ico, target, rng):
    """Beside the fused terms alone, a term changes its target by exactly its forward, bitwise
    (pv_edge: the PV flux reads the corrected pv_edge), and nothing else."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    term = make_term(target, eta_ref(ico, rng))
    physics = with_term("plain", term)
    without = tendencies(ico, h, u, b, f, PHYSICS["plain"])
    got = tendencies(ico, h, u, b, f, physics)
    d = diagnostics(ico, h, u, f, PHYSICS["plain"])
    if target == "pv_edge":
        corrected = diagnostics(ico, h, u, f, physics)
        assert np.array_equal(corrected["pv_edge"], d["pv_edge"] - term.forward(ico, h, u, None, d, physics))
        assert np.abs(corrected["pv_edge"] - d["pv_edge"]).max() > 1e-3 * np.abs(d["pv_edge"]).max()
        expected = (without[0], terms.PVFlux.forward(ico, h, u, b, corrected, physics)
                    + terms.Bernoulli.forward(ico, h, u, b, corrected, physics))
    else:
        i = TARGETS.index(target)
        part = term.forward(ico, h, u, b, d, physics)
        assert np.abs(part).max() > 1e-3 * np.abs(without[i]).max()
        expected = tuple(w + part if j == i else w for j, w in enumerate(without))
    for g, e in zip(got, expected):
        assert np.array_equal(g, e)


@pytest.mark.parametrize("physics", list(PHYSICS))
@pytest.mark.parametrize("target", TARGETS)
def test_tendencies_tangent_and_adjoint(ico, target, physics, rng):
    """Dot test of the tendencies' tangent-linear and adjoint with the term (1e-12), the
    tangent-linear against the tendencies with the term added by hand (Taylor)."""
    h, u, b, f = perturbed_state(ico, "williamson5", rng)
    term = make_term(target, eta_ref(ico, rng))
    name, physics = physics, with_term(physics, term)
    result = dot_product_test(lambda *x: tendencies_tl(ico, h, u, b, f, physics, *x),
                              lambda *y: tendencies_adj(ico, h, u, b, f, physics, *y),
                              directions(ico, rng), adjoint_inputs(ico, rng))
    assert result.relative_error <= 1e-12, result
    result = tangent_taylor_test(lambda *x: reference_tendencies(ico, *x, f, name, term),
                                 lambda *x: tendencies_tl(ico, *x[:3], f, physics, *x[3:]),
                                 (h, u, b), directions(ico, rng), adjoint_inputs(ico, rng))
    assert not result.exact and result.passed(1.9), result


@pytest.mark.parametrize("target", TARGETS)
def test_step_tangent_and_adjoint(ico, target, rng):
    """One RK4 step with the term and APVM and viscosity: the step equals the step of the
    tendencies with the term added by hand to round-off; the dot test of its tangent-linear and
    adjoint (1e-12, both adjoint modes) and the Taylor test of its tangent-linear against that
    step."""
    h, u, b, f = perturbed_state(ico, "williamson6", rng)
    term = make_term(target, eta_ref(ico, rng))
    physics = with_term("all", term)
    model = Model(ico, h.copy(), u.copy(), b, f, DT, physics)
    model.step()
    for name, got, ref in zip(("h", "u"), (model.h, model.u),
                              reference_step(ico, h, u, b, f, "all", term)):
        assert _rel(got, ref) <= 1e-14, name
    for mode in ("deterministic", "atomic"):
        result = dot_product_test(lambda *x: rk4_step_tl(model, h, u, *x),
                                  lambda *y: rk4_step_adj(model, h, u, *y, mode=mode),
                                  directions(ico, rng), adjoint_inputs(ico, rng))
        assert result.relative_error <= 1e-12, (mode, result)

    def tl(h0, u0, b0, dh, du, db):
        return rk4_step_tl(Model(ico, h0, u0, b0, f, DT, physics), h0, u0, dh, du, db)

    result = tangent_taylor_test(lambda *x: reference_step(ico, *x, f, "all", term), tl, (h, u, b),
                                 directions(ico, rng), adjoint_inputs(ico, rng))
    assert not result.exact and result.passed(1.9), result


@pytest.mark.parametrize("target", TARGETS)
def test_local_rows_equal_one_process(mpas, target, rng):
    """The halo depth counts the term's chains; on every rank's local mesh of that depth (3
    ranks) the owned rows of the tendencies and their tangent-linear equal one process's
    bitwise."""
    state = random_state(mpas, rng)
    eta = eta_ref(mpas, rng)
    physics = with_term("plain", make_term(target, eta))
    assert halo_depth(physics) == {"tend_h": 2, "tend_u": 2, "pv_edge": 3}[target]
    dx = directions(mpas, rng)
    whole = (*tendencies(mpas, *state, physics), *tendencies_tl(mpas, *state, physics, *dx))
    owner = partition_sfc(mpas, 3)
    for rank in range(3):
        local = local_mesh(mpas, owner, rank, halo_depth=halo_depth(physics))
        cells, edges, vertices = (local.l2g[loc] for loc in ("cell", "edge", "vertex"))
        rows = (cells, edges, cells, vertices)
        physics = with_term("plain", make_term(target, eta[cells]))
        got = (*tendencies(local.mesh, *(a[r] for a, r in zip(state, rows)), physics),
               *tendencies_tl(local.mesh, *(a[r] for a, r in zip(state, rows)), physics,
                              *(a[r] for a, r in zip(dx, rows))))
        for g, w, loc in zip(got, whole, ("cell", "edge") * 2):
            n = local.n_owned(loc)
            assert np.array_equal(g[:n], w[local.l2g[loc][:n]]), (rank, loc)


# -- the fused paths ------------------------------------------------------------------------------

def check_fused_paths(mesh, target, rng, convert, asnumpy):
    """The fused tendencies, step, tangent-linear and adjoint steps with a term of `target` (and
    APVM and viscosity) against the operator path (NumPy), and the fused dot test; returns the
    fused tendencies and the operator path's on the same device (`convert`ed fields)."""
    h, u, b, f = random_state(mesh, rng)
    eta = eta_ref(mesh, rng)
    physics = with_term("all", make_term(target, eta))
    device_physics = with_term("all", make_term(target, convert(eta)))
    fields = tuple(map(convert, (h, u, b, f)))
    ref = reference_tendencies(mesh, h, u, b, f, "all", physics.extra_terms[0])
    device = tendencies(mesh, *fields, device_physics)
    got = fused_tendencies(mesh, *fields, device_physics)
    for r, g in zip(ref, got):
        assert _rel(asnumpy(g), r) <= 1e-12
    fused = Model(mesh, *fields, DT, device_physics, fused=True)
    numpy = Model(mesh, h, u, b, f, DT, physics)
    fused.step()
    ref = reference_step(mesh, h, u, b, f, "all", physics.extra_terms[0])
    for name, r in zip(("h", "u"), ref):
        assert _rel(asnumpy(getattr(fused, name)), r) <= 1e-12, name
    dx = directions(mesh, rng)
    y = adjoint_inputs(mesh, rng)
    tl = rk4_step_tl(fused, fields[0], fields[1], *map(convert, dx))
    for name, g, r in zip(("dh", "du"), tl, rk4_step_tl(numpy, h, u, *dx)):
        assert _rel(asnumpy(g), r) <= 1e-12, name
    ref = rk4_step_adj(numpy, h, u, *y, mode="deterministic")
    for mode in ("deterministic", "atomic"):
        adj = rk4_step_adj(fused, fields[0], fields[1], *map(convert, y), mode=mode)
        for name, g, r in zip(("h_adj", "u_adj", "b_adj"), adj, ref):
            assert _rel(asnumpy(g), r) <= 1e-12, (mode, name)
        assert_adjoint_identity(tl, y, dx, adj, msg=mode)
    return got, device


@pytest.mark.parametrize("target", TARGETS)
def test_fused_paths_on_host(ico, target, on_host, rng):
    """On the host: the fused paths with the term equal the operator path (the tendencies
    bitwise on the same device code), the fused tangent-linear and adjoint steps pass the dot
    test."""
    got, device = check_fused_paths(ico, target, rng, host, np.asarray)
    for g, d in zip(got, device):
        assert np.array_equal(g, d)


@pytest.mark.parametrize("target", [None, *TARGETS])
def test_a_fused_step_does_the_work_of_its_terms_alone_on_host(ico, target, on_host, rng):
    """A fused step without terms outside the kernels launches the four passes alone; with one
    term, the kernels of the other targets are those without their extra input."""
    h, u, b, f = map(host, random_state(ico, rng))
    physics = (Physics() if target is None
               else with_term("plain", make_term(target, host(eta_ref(ico, rng)))))
    Model(ico, h, u, b, f, DT, physics, fused=True).step()
    launched = {family: names for family, names in on_host.items() if names}
    stage = ["sw_pv_vertex", "sw_pv_edge" + ("_apvm" if target == "pv_edge" else ""), "sw_cell_stage",
             "sw_edge_stage" + ("_extra" if target == "tend_u" else "")]
    assert launched["shallow_water"] == 4 * stage
    if target is None:
        assert set(launched) == {"shallow_water"}


@pytest.mark.gpu
@pytest.mark.parametrize("target", TARGETS)
def test_fused_paths_on_gpu(ico4, target, rng):
    """On a GPU (float64): as on the host, the fused tendencies to 1e-12 of the operator path's
    on the GPU."""
    import cupy

    got, device = check_fused_paths(ico4, target, rng, cupy.asarray, cupy.asnumpy)
    for g, d in zip(got, device):
        assert _rel(cupy.asnumpy(g), cupy.asnumpy(d)) <= 1e-12
