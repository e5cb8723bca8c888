"""Analytic fields on the sphere with their exact derivatives, evaluated at mesh locations.

A `ScalarField` is given on unit vectors p (n, 3) by its value f(p), the Cartesian gradient of a
smooth extension of f to R^3 (only its part tangent to the sphere matters) and the Laplace-Beltrami
operator on the unit sphere. On the sphere of radius a:

    grad f = (I - p p^T) grad3 f / a,        lap f = lap_unit f / a^2.

Homogeneous harmonic polynomials of degree l are spherical harmonics (lap_unit = -l (l+1) f), so
sums of them have every derivative in closed form; `exp_field` adds a field with all degrees.
A `VelocityField` is u = U (p x grad psi + grad chi) * a (psi, chi dimensionless scalar fields),
with exact divergence U/a lap_unit chi, relative vorticity U/a lap_unit psi and vector Laplacian
(MPAS del2u) grad(div) + k x grad(vorticity), whose normal component is d(div)/dn - d(vort)/dt.
Normal and tangential components at edges use the MPAS
normal (from cellsOnEdge[e,0] towards cellsOnEdge[e,1], along the great circle through the two cell
centres, taken at the edge point) and the tangent k x n.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: Williamson et al. (1992) test case 6 (Rossby-Haurwitz wave): omega = K = 7.848e-6 1/s, R = 4.
RH_OMEGA = 7.848e-6
RH_K = 7.848e-6
#: Williamson test case 2 velocity scale: u0 = 2 pi a / (12 days) (38.6 m/s on the Earth).
TC2_PERIOD_S = 12 * 86400.0


def dot(p, q):
    return np.einsum("ij,ij->i", p, q)


def signed_area(p, q, r):
    """Signed area of the spherical triangles (p, q, r) on the unit sphere (> 0 counter-clockwise)."""
    return 2.0 * np.arctan2(dot(p, np.cross(q, r)), 1.0 + dot(p, q) + dot(q, r) + dot(r, p))


def tangent_projection(p, v):
    """Part of the vectors v (n, 3) tangent to the unit sphere at p (n, 3)."""
    return v - dot(p, v)[:, None] * p


@dataclass(frozen=True)
class ScalarField:
    """f on the unit sphere: value(p), grad3(p) (R^3 gradient of an extension), lap(p) (unit sphere).

    `lap_grad3` is the R^3 gradient of an extension of lap(p), when known (needed for the vector
    Laplacian of velocity fields built on this field).
    """

    name: str
    value: Callable
    grad3: Callable
    lap: Callable
    lap_grad3: Callable | None = None

    def __add__(self, other: "ScalarField") -> "ScalarField":
        lg = None
        if self.lap_grad3 is not None and other.lap_grad3 is not None:
            lg = lambda p: self.lap_grad3(p) + other.lap_grad3(p)  # noqa: E731
        return ScalarField(f"{self.name}+{other.name}", lambda p: self.value(p) + other.value(p),
                           lambda p: self.grad3(p) + other.grad3(p),
                           lambda p: self.lap(p) + other.lap(p), lg)

    def scaled(self, c: float) -> "ScalarField":
        lg = None if self.lap_grad3 is None else (lambda p: c * self.lap_grad3(p))
        return ScalarField(f"{c:g}*{self.name}", lambda p: c * self.value(p),
                           lambda p: c * self.grad3(p), lambda p: c * self.lap(p), lg)

    def rotated(self, Q: np.ndarray) -> "ScalarField":
        """g(p) = f(Q p) for an orthogonal 3x3 Q (its gradients are Q^T grad f(Q p))."""
        Q = np.asarray(Q, dtype=np.float64)

        def rot(fn):
            return lambda p: fn(p @ Q.T)

        def rot_grad(fn):
            return lambda p: fn(p @ Q.T) @ Q

        lg = None if self.lap_grad3 is None else rot_grad(self.lap_grad3)
        return ScalarField(f"R({self.name})", rot(self.value), rot_grad(self.grad3), rot(self.lap), lg)

    # on the sphere of radius a -----------------------------------------------------------------
    def grad(self, p, a=1.0):
        """Surface gradient (n, 3) at unit vectors p on the sphere of radius a (default: unit sphere)."""
        return tangent_projection(p, self.grad3(p)) / a

    def laplacian(self, p, a):
        return self.lap(p) / (a * a)


def harmonic(name: str, value: Callable, grad3: Callable, degree: int) -> ScalarField:
    """A homogeneous harmonic polynomial of `degree` l: lap = -l (l+1) f on the unit sphere."""
    k = -degree * (degree + 1.0)
    return ScalarField(name, value, grad3, lambda p: k * value(p), lambda p: k * grad3(p))


def linear_field(d) -> ScalarField:
    """f = d . p (degree 1)."""
    d = np.asarray(d, dtype=np.float64)
    return harmonic("d.p", lambda p: p @ d, lambda p: np.broadcast_to(d, p.shape).copy(), 1)


def xyz_field() -> ScalarField:
    """f = x y z (degree 3)."""
    return harmonic("xyz", lambda p: p[:, 0] * p[:, 1] * p[:, 2],
                    lambda p: np.stack([p[:, 1] * p[:, 2], p[:, 0] * p[:, 2], p[:, 0] * p[:, 1]], 1), 3)


def xy_field() -> ScalarField:
    """f = x y (degree 2)."""
    return harmonic("xy", lambda p: p[:, 0] * p[:, 1],
                    lambda p: np.stack([p[:, 1], p[:, 0], np.zeros(p.shape[0])], 1), 2)


def sectoral_field(m: int, *, times_z: bool = False) -> ScalarField:
    """f = Re((x + i y)^m) (degree m), or z Re((x + i y)^m) (degree m + 1) with `times_z`.

    In lat-lon: cos^m(lat) cos(m lon), resp. cos^m(lat) sin(lat) cos(m lon).
    """
    def parts(p):
        w = p[:, 0] + 1j * p[:, 1]
        return w ** m, m * w ** (m - 1)  # h = Re(w^m); dh/dx = Re(m w^(m-1)), dh/dy = -Im(m w^(m-1))

    def value(p):
        h = parts(p)[0].real
        return h * p[:, 2] if times_z else h

    def grad3(p):
        wm, dw = parts(p)
        gx, gy = dw.real, -dw.imag
        if times_z:
            z = p[:, 2]
            return np.stack([z * gx, z * gy, wm.real], 1)
        return np.stack([gx, gy, np.zeros_like(gx)], 1)

    name = f"z*Re(w^{m})" if times_z else f"Re(w^{m})"
    return harmonic(name, value, grad3, m + 1 if times_z else m)


def exp_field(d) -> ScalarField:
    """f = exp(d . p): every spherical-harmonic degree. With F = exp(d.x) on R^3,
    lap_unit f = F (|d|^2 - (d.p)^2 - 2 d.p) (= lap F - p.Hess(F).p - 2 p.grad F at |p| = 1)."""
    d = np.asarray(d, dtype=np.float64)
    dd = float(d @ d)

    def value(p):
        return np.exp(p @ d)

    def grad3(p):
        return value(p)[:, None] * d

    def lap(p):
        s = p @ d
        return value(p) * (dd - s * s - 2.0 * s)

    def lap_grad3(p):
        # gradient of F(x) (dd - (d.x)^2 - 2 d.x) on R^3
        s = p @ d
        return value(p)[:, None] * ((dd - s * s - 2.0 * s) - 2.0 * s - 2.0)[:, None] * d

    return ScalarField(f"exp({np.round(d, 3).tolist()}.p)", value, grad3, lap, lap_grad3)


@dataclass(frozen=True)
class VelocityField:
    """u = U (p x grad_unit psi + grad_unit chi) on the sphere of radius a (m/s).

    The stream function is U a psi and the velocity potential U a chi (m^2/s).
    """

    name: str
    U: float
    psi: ScalarField | None = None
    chi: ScalarField | None = None

    def vector(self, p):
        """Velocity vectors (n, 3) at unit vectors p (independent of a)."""
        u = np.zeros_like(p)
        if self.psi is not None:
            u += np.cross(p, tangent_projection(p, self.psi.grad3(p)))
        if self.chi is not None:
            u += tangent_projection(p, self.chi.grad3(p))
        return self.U * u

    def divergence(self, p, a):
        return np.zeros(p.shape[0]) if self.chi is None else self.U / a * self.chi.lap(p)

    def vorticity(self, p, a):
        return np.zeros(p.shape[0]) if self.psi is None else self.U / a * self.psi.lap(p)

    def vector_laplacian(self, p, a):
        """grad(div) + k x grad(vorticity) (n, 3) (= grad div - curl curl u), the MPAS del2u."""
        out = np.zeros_like(p)
        if self.chi is not None:
            out += tangent_projection(p, self.chi.lap_grad3(p))
        if self.psi is not None:
            out += np.cross(p, tangent_projection(p, self.psi.lap_grad3(p)))
        return self.U / (a * a) * out

    def kinetic_energy(self, p):
        u = self.vector(p)
        return 0.5 * dot(u, u)


def solid_body_flow(a: float, alpha: float = np.pi / 4) -> VelocityField:
    """Williamson test case 2 flow, u0 = 2 pi a / 12 days, axis tilted by alpha from the pole.

    u = u0 (cos(lat) cos(alpha) + cos(lon) sin(lat) sin(alpha)), v = -u0 sin(lon) sin(alpha);
    psi = -a u0 (sin(lat) cos(alpha) - cos(lon) cos(lat) sin(alpha)) = -a u0 (z cos(alpha) - x sin(alpha)).
    """
    u0 = 2.0 * np.pi * a / TC2_PERIOD_S
    return VelocityField("tc2", u0, psi=linear_field([np.sin(alpha), 0.0, -np.cos(alpha)]))


def rossby_haurwitz_flow(a: float, Q: np.ndarray | None = None) -> VelocityField:
    """Williamson test case 6 wave (R = 4): psi = -a^2 w sin(lat) + a^2 K cos^4(lat) sin(lat) cos(4 lon).

    With U = a w and K = w: psi / (U a) = -z + z Re((x + i y)^4). `Q` rotates the pattern.
    """
    psi = linear_field([0.0, 0.0, -1.0]) + sectoral_field(4, times_z=True).scaled(RH_K / RH_OMEGA)
    if Q is not None:
        psi = psi.rotated(Q)
    return VelocityField("rh4", a * RH_OMEGA, psi=psi)


def divergent_flow(U: float = 20.0, Q: np.ndarray | None = None) -> VelocityField:
    """A purely divergent flow: chi = x y + z Re((x + i y)^2) / 2 (degrees 2 and 3), rotated by Q."""
    chi = xy_field() + sectoral_field(2, times_z=True).scaled(0.5)
    if Q is not None:
        chi = chi.rotated(Q)
    return VelocityField("divergent", U, chi=chi)


def mixed_flow(a: float, Q: np.ndarray | None = None) -> VelocityField:
    """Rossby-Haurwitz wave plus a divergent part (non-zero divergence and vorticity)."""
    rh, dv = rossby_haurwitz_flow(a, Q), divergent_flow(Q=Q)
    return VelocityField("rh4+divergent", rh.U, psi=rh.psi, chi=dv.chi.scaled(dv.U / rh.U))


def smooth_scalar(Q: np.ndarray | None = None) -> ScalarField:
    """A smooth scalar with all degrees plus a few harmonics: exp(d.p) + x y z + cos^3(lat) cos(3 lon)."""
    f = exp_field([0.6, -0.3, 0.8]) + xyz_field() + sectoral_field(3)
    return f if Q is None else f.rotated(Q)


def spherical_harmonic(degree: int, Q: np.ndarray) -> ScalarField:
    """A degree-l harmonic (l = 1..4: z, x y, x y z, Re((x + i y)^4)) rotated by Q: f(Q p)."""
    fields = {1: lambda: linear_field([0.0, 0.0, 1.0]), 2: xy_field, 3: xyz_field,
              4: lambda: sectoral_field(4)}
    return fields[degree]().rotated(Q)


def solid_body(omega_vector):
    """Velocity of the solid-body rotation U(x) = Omega x x at positions x (n, 3) in metres."""
    omega_vector = np.asarray(omega_vector, dtype=np.float64)
    return lambda x: np.cross(omega_vector, x)


def random_rotation(rng) -> np.ndarray:
    """A random proper rotation matrix drawn from `rng`."""
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def rotation(seed: int = 1) -> np.ndarray:
    """A fixed proper rotation (so that fields do not line up with the mesh's symmetry axes)."""
    return random_rotation(np.random.default_rng(seed))


# -- mesh locations ------------------------------------------------------------------------------

def _unit(x, y, z):
    p = np.stack([x, y, z], 1).astype(np.float64)
    return p / np.linalg.norm(p, axis=1)[:, None]


def cell_points(mesh):
    return _unit(mesh.xCell, mesh.yCell, mesh.zCell)


def edge_points(mesh):
    return _unit(mesh.xEdge, mesh.yEdge, mesh.zEdge)


def vertex_points(mesh):
    return _unit(mesh.xVertex, mesh.yVertex, mesh.zVertex)


def points(mesh, location: str):
    return {"cell": cell_points, "edge": edge_points, "vertex": vertex_points}[location](mesh)


def edge_normals(mesh):
    """Unit normals (nEdges, 3) at the edge points: tangent at p_e of the great circle through
    cellsOnEdge[e,0] and [e,1], pointing towards cellsOnEdge[e,1]."""
    pc, pe = cell_points(mesh), edge_points(mesh)
    n = np.cross(np.cross(pc[mesh.cellsOnEdge[:, 0]], pc[mesh.cellsOnEdge[:, 1]]), pe)
    return n / np.linalg.norm(n, axis=1)[:, None]


def edge_tangents(mesh):
    """Unit tangents k x n (nEdges, 3) at the edge points."""
    return np.cross(edge_points(mesh), edge_normals(mesh))


def normal_component(mesh, vectors):
    """Edge-normal component of vectors (nEdges, 3) given at the edge points."""
    return dot(vectors, edge_normals(mesh))


def tangential_component(mesh, vectors):
    return dot(vectors, edge_tangents(mesh))


def location_weights(mesh, location: str):
    """Area weights of the l2 norm: areaCell, dcEdge*dvEdge/2 (the edge's rhombus), areaTriangle."""
    return {"cell": lambda: mesh.areaCell, "edge": lambda: 0.5 * mesh.dcEdge * mesh.dvEdge,
            "vertex": lambda: mesh.areaTriangle}[location]()


def _errors(approx, exact):
    """(approx - exact, exact) in float64; for vectors (n, 3) their pointwise Euclidean lengths."""
    err, ref = np.asarray(approx, dtype=np.float64) - exact, np.asarray(exact)
    if err.ndim == 2:
        err, ref = np.linalg.norm(err, axis=1), np.linalg.norm(ref, axis=1)
    return err, ref


def rel_l2(weights, approx, exact) -> float:
    """sqrt(sum w |approx - exact|^2 / sum w |exact|^2); rows of (n, 3) arrays are vectors."""
    err, ref = _errors(approx, exact)
    return float(np.sqrt(np.sum(weights * err * err) / np.sum(weights * ref * ref)))


def rel_linf(approx, exact) -> float:
    """max |approx - exact| / max |exact|; rows of (n, 3) arrays are vectors."""
    err, ref = _errors(approx, exact)
    return float(np.max(np.abs(err)) / np.max(np.abs(ref)))


def error_norms(mesh, location: str, approx, exact) -> dict:
    """Relative errors `rel_l2` with the area weights of `location_weights`, and `rel_linf`."""
    return {"l2": rel_l2(location_weights(mesh, location), approx, exact),
            "linf": rel_linf(approx, exact)}


def _arc_mean(p0, p1, direction, field: VelocityField, npoints: int):
    """Mean over the great-circle arcs p0 -> p1 of u . d, d the unit normal of the arcs' plane
    (p0 x p1) oriented like `direction` (Gauss-Legendre quadrature in arc length)."""
    theta = np.arctan2(np.linalg.norm(np.cross(p0, p1), axis=1), dot(p0, p1))
    d = np.cross(p0, p1)
    d /= np.linalg.norm(d, axis=1)[:, None]
    d *= np.sign(dot(d, direction))[:, None]
    x, w = np.polynomial.legendre.leggauss(npoints)
    out = np.zeros(p0.shape[0])
    for xi, wi in zip(x, w):
        t = 0.5 * (xi + 1.0)
        q = (np.sin((1 - t) * theta)[:, None] * p0 + np.sin(t * theta)[:, None] * p1) \
            / np.sin(theta)[:, None]
        out += 0.5 * wi * dot(field.vector(q), d)
    return out


def edge_mean_normal(mesh, field: VelocityField, npoints: int = 4):
    """Mean of u . n along each Voronoi edge (the arc verticesOnEdge[e,0] -> [e,1]), n its unit normal
    oriented like the MPAS normal: dvEdge times this is the exact volume flux through the edge."""
    pv = vertex_points(mesh)
    return _arc_mean(pv[mesh.verticesOnEdge[:, 0]], pv[mesh.verticesOnEdge[:, 1]], edge_normals(mesh),
                     field, npoints)


def edge_mean_along_normal(mesh, field: VelocityField, npoints: int = 4):
    """Mean of the component of u along the arc cellsOnEdge[e,0] -> [e,1] (the MPAS normal direction):
    dcEdge times this is the exact circulation along the dual (triangle) edge."""
    pc = cell_points(mesh)
    c0, c1 = pc[mesh.cellsOnEdge[:, 0]], pc[mesh.cellsOnEdge[:, 1]]
    # the arc's direction at every point is (c0 x c1) x q: the mean of u . ((c0 x c1) x q)/|c0 x c1|
    x, w = np.polynomial.legendre.leggauss(npoints)
    theta = np.arctan2(np.linalg.norm(np.cross(c0, c1), axis=1), dot(c0, c1))
    axis = np.cross(c0, c1)
    axis /= np.linalg.norm(axis, axis=1)[:, None]
    out = np.zeros(mesh.nEdges)
    for xi, wi in zip(x, w):
        t = 0.5 * (xi + 1.0)
        q = (np.sin((1 - t) * theta)[:, None] * c0 + np.sin(t * theta)[:, None] * c1) \
            / np.sin(theta)[:, None]
        out += 0.5 * wi * dot(field.vector(q), np.cross(axis, q))
    return out


# -- operator cases: inputs sampled from analytic fields, exact outputs at the output location ----

@dataclass(frozen=True)
class Case:
    """`operator(mesh, *inputs)` against `exact` at `location`; `label` names the case."""

    label: str
    operator: str
    location: str
    build: Callable  # mesh -> (inputs tuple, exact array (n,) or (n, 3))


def _flow(mesh):
    return mixed_flow(mesh.sphere_radius, rotation())


def _scalar():
    return smooth_scalar(rotation())


def _un(mesh):
    return normal_component(mesh, _flow(mesh).vector(edge_points(mesh)))


def _build_cases() -> dict[str, Case]:
    def c(label, operator, location, build):
        return label, Case(label, operator, location, build)

    def scalar_at(loc):
        return lambda m: _scalar().value(points(m, loc))

    a = lambda m: m.sphere_radius  # noqa: E731
    pe, pc, pv = edge_points, cell_points, vertex_points
    cases = [
        c("div_e2c", "div_e2c", "cell",
          lambda m: ((_un(m),), _flow(m).divergence(pc(m), a(m)))),
        c("div_e2c[mean flux]", "div_e2c", "cell",
          lambda m: ((edge_mean_normal(m, _flow(m)),), _flow(m).divergence(pc(m), a(m)))),
        c("curl_e2v", "curl_e2v", "vertex",
          lambda m: ((_un(m),), _flow(m).vorticity(pv(m), a(m)))),
        c("curl_e2v[mean circulation]", "curl_e2v", "vertex",
          lambda m: ((edge_mean_along_normal(m, _flow(m)),), _flow(m).vorticity(pv(m), a(m)))),
        c("grad_c2e", "grad_c2e", "edge",
          lambda m: ((scalar_at("cell")(m),), normal_component(m, _scalar().grad(pe(m), a(m))))),
        c("grad_v2e", "grad_v2e", "edge",
          lambda m: ((scalar_at("vertex")(m),), tangential_component(m, _scalar().grad(pe(m), a(m))))),
        c("interp_c2e", "interp_c2e", "edge", lambda m: ((scalar_at("cell")(m),), scalar_at("edge")(m))),
        c("interp_v2e", "interp_v2e", "edge", lambda m: ((scalar_at("vertex")(m),), scalar_at("edge")(m))),
        c("interp_c2v", "interp_c2v", "vertex",
          lambda m: ((scalar_at("cell")(m),), scalar_at("vertex")(m))),
        c("interp_v2c", "interp_v2c", "cell",
          lambda m: ((scalar_at("vertex")(m),), scalar_at("cell")(m))),
        c("tangential_e2e", "tangential_e2e", "edge",
          lambda m: ((_un(m),), tangential_component(m, _flow(m).vector(pe(m))))),
        c("laplacian_c2c", "laplacian_c2c", "cell",
          lambda m: ((scalar_at("cell")(m),), _scalar().laplacian(pc(m), a(m)))),
        c("vector_laplacian_e2e", "vector_laplacian_e2e", "edge",
          lambda m: ((_un(m),), normal_component(m, _flow(m).vector_laplacian(pe(m), a(m))))),
        c("reconstruct_e2c", "reconstruct_e2c", "cell",
          lambda m: ((_un(m),), _flow(m).vector(pc(m)))),
        c("ke_e2c", "ke_e2c", "cell", lambda m: ((_un(m),), _flow(m).kinetic_energy(pc(m)))),
    ]
    return dict(cases)


#: Every convergence case by label. Inputs are point values at the MPAS locations, except
#: "div_e2c[mean flux]" (exact edge-mean normal velocity along the Voronoi edge, i.e. exact fluxes)
#: and "curl_e2v[mean circulation]" (exact mean along the cell-to-cell arc, i.e. exact circulation).
CASES: dict[str, Case] = _build_cases()


def measure(mesh, case: Case, operators) -> dict:
    """Relative l2 / linf errors of `case` on `mesh`; `operators` maps names to callables
    (the `meshops` module). A tuple output (vector components) is compared as vectors."""
    inputs, exact = case.build(mesh)
    out = getattr(operators, case.operator)(mesh, *inputs)
    if isinstance(out, tuple):
        out = np.stack([np.asarray(o) for o in out], axis=1)
    return error_norms(mesh, case.location, out, exact)


def centroid_offset(mesh) -> float:
    """max_c |x_c - centroid of Voronoi cell c| / mean(dcEdge): 0 on an exact SCVT."""
    pc, pv = cell_points(mesh), vertex_points(mesh)
    rows = np.arange(mesh.nCells)
    cen = np.zeros_like(pc)
    for j in range(mesh.maxEdges):
        live = j < mesh.nEdgesOnCell
        prev = np.where(j == 0, mesh.nEdgesOnCell - 1, j - 1)
        va = pv[mesh.verticesOnCell[rows, np.where(live, prev, 0)]]
        vb = pv[mesh.verticesOnCell[rows, np.where(live, j, 0)]]
        w = np.where(live, signed_area(pc, va, vb), 0.0)
        cen += (pc + va + vb) * w[:, None]  # planar-triangle centroids, weighted by area
    cen /= np.linalg.norm(cen, axis=1)[:, None]
    return float(np.max(np.linalg.norm(cen - pc, axis=1)) * mesh.sphere_radius / np.mean(mesh.dcEdge))


def mesh_spacing(mesh) -> float:
    """Mean cell spacing sqrt(4 pi a^2 / nCells) (m)."""
    return float(np.sqrt(4 * np.pi * mesh.sphere_radius**2 / mesh.nCells))


def orders(spacings, errors) -> np.ndarray:
    """Observed orders log(e_i / e_{i+1}) / log(h_i / h_{i+1}) between successive meshes."""
    h, e = np.asarray(spacings), np.asarray(errors)
    return np.log(e[:-1] / e[1:]) / np.log(h[:-1] / h[1:])


def observed_orders(errors) -> list[float]:
    """log2(err_L / err_{L+1}) over consecutive levels (the mesh spacing halves per level)."""
    e = np.asarray(errors, dtype=np.float64)
    return list(np.log2(e[:-1] / e[1:]))
