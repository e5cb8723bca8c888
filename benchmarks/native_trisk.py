"""The TRiSK shallow-water RK4 step written natively in JAX or PyTorch with gathers (the peers'
stencils, benchmarks/peers.py), as a user of those frameworks would write it; derivatives by the
framework's own autodiff. The same arithmetic as `swm.tendencies` with `Physics()` (no APVM, no
viscosity) and the RK4 step of `framework.stepper` (`framework.timestepping`'s coefficients):

    h_edge = interp_c2e(h),  pv_vertex = (f + curl_e2v(u)) / interp_c2v(h),  pv_edge = interp_v2e(pv_vertex)
    tend_h = -div(h_edge u),  tend_u = pv_flux(h_edge u, pv_edge) - grad_c2e(ke_e2c(u) + g (h + b))

`constants(mesh)` -> dict of NumPy arrays (coefficients float64, indices int64); `step(c, h, u, b,
f_vertex, gravity, dt)` -> (h_next, u_next), written once for both frameworks (indexing, products
and sums only).
"""
from __future__ import annotations

from benchmarks.peers import (_c2v, _consts, _curl, _div, _g, _grad_c, _ke, _mean2, _tangential, gather,
                              pv_flux)
from framework.timestepping import RK4_A, RK4_B


def constants(mesh) -> dict:
    """The stencils of the step on `mesh`."""
    return _consts(c2e=_mean2(mesh.cellsOnEdge), v2e=_mean2(mesh.verticesOnEdge), c2v=_c2v(mesh),
                   curl=_curl(mesh), div=_div(mesh), ke=_ke(mesh), grad=_grad_c(mesh),
                   pv=_tangential(mesh))


def tendencies(c, h, u, b, f_vertex, gravity):
    h_edge = _g(c, "c2e", h)
    pv_vertex = (f_vertex + _g(c, "curl", u)) / _g(c, "c2v", h)
    pv_edge = _g(c, "v2e", pv_vertex)
    flux = h_edge * u
    tend_h = -gather(flux, c["div_idx"], c["div_coef"])
    tend_u = (pv_flux(flux, pv_edge, c["pv_idx"], c["pv_coef"])
              - _g(c, "grad", _g(c, "ke", u * u) + gravity * (h + b)))
    return tend_h, tend_u


def step(c, h, u, b, f_vertex, gravity, dt):
    """One RK4 step: stage k's tendencies from the provisional state x + A_k dt K_{k-1}, the new
    state x + dt sum_k B_k K_k."""
    h_new, u_new, h_k, u_k = h, u, h, u
    for stage in range(4):
        th, tu = tendencies(c, h_k, u_k, b, f_vertex, gravity)
        h_new, u_new = h_new + (RK4_B[stage] * dt) * th, u_new + (RK4_B[stage] * dt) * tu
        if stage < 3:
            h_k, u_k = h + (RK4_A[stage] * dt) * th, u + (RK4_A[stage] * dt) * tu
    return h_new, u_new
