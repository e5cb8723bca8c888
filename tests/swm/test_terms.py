"""The terms of the tendencies (swm.terms): a term added to `TERMS` alone (here a linear drag,
tend_u -= r u) reaches the forward tendencies, their tangent-linear and adjoint (dot test), the halo
depth, the fused step and the fused adjoint (on the host, the CUDA sources compiled with g++): one
class is all a new term takes."""
import numpy as np
import pytest

from adjoint import dot_product_test
from swm import terms
from swm.distribution import halo_depth
from swm.fused import fused_record, fused_tendencies
from swm.fused_adjoint import FusedStageAdjoint
from swm.tendencies import Physics, tendencies, tendencies_adj, tendencies_tl

from tests.meshops.host_harness import host, host_fixtures
from tests.swm.test_fused import FAMILIES, PHYSICS, _rel, ico, random_state  # noqa: F401

host_kernels, on_host = host_fixtures(*FAMILIES, "shallow_water_adjoint")
R = 1e-5       # drag rate (1/s)


class Drag:
    """tend_u -= R u: a linear drag, pointwise (no operator chain)."""
    name, fused, target = "drag", False, "tend_u"
    chains = ()

    @staticmethod
    def active(physics) -> bool:
        return True

    @staticmethod
    def forward(mesh, h, u, b, d, physics):
        return -(R * u)

    @staticmethod
    def tangent(mesh, base, t, physics):
        return -(R * t["du"])

    @staticmethod
    def adjoint(mesh, base, a, physics, mode):
        a["u"] = -(R * a["tend_u"]) if a["u"] is None else a["u"] - R * a["tend_u"]


@pytest.fixture
def with_drag(monkeypatch):
    monkeypatch.setattr(terms, "TERMS", terms.TERMS + (Drag,))


def test_every_term_declares_its_parts():
    for term in terms.TERMS:
        assert term.target in ("tend_h", "tend_u", "pv_edge"), term.name
        assert all(callable(getattr(term, f)) for f in ("active", "forward", "tangent", "adjoint")), term.name
        assert isinstance(term.fused, bool) and all(isinstance(c, tuple) for c in term.chains), term.name
    assert halo_depth(Physics()) == 2 and halo_depth(Physics(apvm=0.5, dt=600.0)) == 3


@pytest.mark.parametrize("physics", ["plain", "apvm_visc2_visc4"])
def test_a_new_term_reaches_the_tendencies_and_their_adjoint(ico, physics, with_drag, rng):
    physics = PHYSICS[physics]
    h, u, b, f = random_state(ico, rng)
    with_drag_u = tendencies(ico, h, u, b, f, physics)[1]
    base_u = tendencies(ico, h, u, b, f, physics)[1]          # same terms: equal bitwise
    assert np.array_equal(with_drag_u, base_u)
    plain = [t for t in terms.TERMS if t is not Drag]
    without = terms.TERMS
    terms.TERMS = tuple(plain)
    try:
        no_drag_u = tendencies(ico, h, u, b, f, physics)[1]
    finally:
        terms.TERMS = without
    np.testing.assert_allclose(with_drag_u - no_drag_u, -R * u, rtol=1e-6,
                               atol=1e-12 * np.abs(with_drag_u).max())
    dx = (10.0 * rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges),
          10.0 * rng.standard_normal(ico.nCells))
    y = (rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges))
    result = dot_product_test(lambda *x: tendencies_tl(ico, h, u, b, f, physics, *x),
                              lambda *g: tendencies_adj(ico, h, u, b, f, physics, *g), dx, y)
    assert result.relative_error <= 1e-12


def test_a_new_term_reaches_the_fused_step_and_adjoint_on_host(ico, with_drag, on_host, rng):
    physics = PHYSICS["apvm_visc2_visc4"]
    h, u, b, f = random_state(ico, rng)
    ref = tendencies(ico, h, u, b, f, physics)
    device = tendencies(ico, *map(host, (h, u, b, f)), physics)
    got = fused_tendencies(ico, *map(host, (h, u, b, f)), physics)
    assert "sw_edge_stage_extra" in on_host["shallow_water"]
    for r, d, g in zip(ref, device, got):
        assert np.array_equal(g, d) and _rel(g, r) <= 1e-13
    adj = (rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges))
    ref = tendencies_adj(ico, h, u, b, f, physics, *adj, mode="deterministic")
    record = fused_record(ico, *map(host, (h, u, b, f)), physics)
    for mode in ("deterministic", "atomic"):
        got = FusedStageAdjoint(ico)(record, physics, *map(host, adj), mode=mode)
        for name, r, g in zip(("h_adj", "u_adj", "b_adj"), ref, got):
            assert _rel(g, r) <= 1e-12, (mode, name)


def test_a_term_in_the_physics_reaches_every_path_on_host(ico, on_host, rng):
    """`Physics(extra_terms=(Relaxation(u_ref, tau),))`: its tangent and adjoint pass the dot test,
    the fused tendencies equal the operator path's bitwise, the fused adjoint its adjoint."""
    from dataclasses import replace

    from swm.terms import Relaxation

    h, u, b, f = random_state(ico, rng)
    u_ref = u + rng.standard_normal(ico.nEdges)
    physics = replace(PHYSICS["apvm_visc2_visc4"], extra_terms=(Relaxation(u_ref, 86400.0),))
    host_physics = replace(physics, extra_terms=(Relaxation(host(u_ref), 86400.0),))
    dx = (10.0 * rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges),
          10.0 * rng.standard_normal(ico.nCells))
    y = (rng.standard_normal(ico.nCells), rng.standard_normal(ico.nEdges))
    result = dot_product_test(lambda *x: tendencies_tl(ico, h, u, b, f, physics, *x),
                              lambda *g: tendencies_adj(ico, h, u, b, f, physics, *g), dx, y)
    assert result.relative_error <= 1e-12
    device = tendencies(ico, *map(host, (h, u, b, f)), host_physics)
    got = fused_tendencies(ico, *map(host, (h, u, b, f)), host_physics)
    for d, g in zip(device, got):
        assert np.array_equal(g, d)
    ref = tendencies_adj(ico, h, u, b, f, physics, *y, mode="deterministic")
    record = fused_record(ico, *map(host, (h, u, b, f)), host_physics)
    got = FusedStageAdjoint(ico)(record, host_physics, *map(host, y))
    for name, r, g in zip(("h_adj", "u_adj", "b_adj"), ref, got):
        assert _rel(g, r) <= 1e-12, name
