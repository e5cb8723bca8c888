"""Base states and directions of the model's tangent-linear and adjoint tests: a Williamson test
case with fresh random perturbations (a state near a physical one, never a case's exact field),
and random directions scaled like the fields they perturb."""

from swm import testcases
from swm.tendencies import Physics

#: The physics variants every adjoint is tested with (APVM's dt is the model's).
PHYSICS = {"plain": Physics(), "apvm": Physics(apvm=0.5), "visc2": Physics(visc2=1e5),
           "visc4": Physics(visc4=1e15), "all": Physics(apvm=0.5, visc2=1e5, visc4=1e15)}
#: The time step of the tests (s): stable on level-3/4 icosahedral meshes.
DT = 900.0


def perturbed_state(mesh, case, rng):
    """(h, u, b, f_vertex) of Williamson `case` with random perturbations: h by 20 m, u by 2 m/s,
    b by 20 m (so b is never zero, even in case 6)."""
    s = testcases.CASES[case](mesh)
    return (s.h + 20.0 * rng.standard_normal(mesh.nCells),
            s.u + 2.0 * rng.standard_normal(mesh.nEdges),
            s.b + 20.0 * rng.standard_normal(mesh.nCells), s.f_vertex)


def directions(mesh, rng):
    """A random direction (dh, du, db): 10 m, 1 m/s, 10 m."""
    return (10.0 * rng.standard_normal(mesh.nCells), rng.standard_normal(mesh.nEdges),
            10.0 * rng.standard_normal(mesh.nCells))


def adjoint_inputs(mesh, rng):
    """A random adjoint of the state (h_adj on cells, u_adj on edges)."""
    return rng.standard_normal(mesh.nCells), rng.standard_normal(mesh.nEdges)
