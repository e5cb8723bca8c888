"""The hydrostatic core on CuPy (skipped without CuPy and a CUDA device): one RK4 step of the
operator path equals NumPy's to round-off, in float64 and float32, with the Held-Suarez forcing
and del4 dissipation on."""
import numpy as np
import pytest

from grids.cache import cached_icosahedral
from hydrostatic import levels, testcases
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-4)])
def test_cupy_step_equals_numpy_to_round_off(rng, dtype, tol):
    import cupy

    mesh = cached_icosahedral(3, lloyd_iterations=50)
    A, B = levels.coefficients()
    s = testcases.initial_state(mesh, "held_suarez", A, B)
    u = s.u + rng.standard_normal(s.u.shape)
    out = {}
    for xp in (np, cupy):
        def cast(a):
            return xp.asarray(np.asarray(a, dtype=dtype))
        physics = Physics(p_top=float(A[-1]), dB=cast(B[:-1] - B[1:]), visc4=1e16,
                          forcing=HeldSuarez(cast(mesh.latCell)))
        model = Model(mesh, cast(s.mass), cast(s.theta_mass), cast(u), cast(s.phi_s),
                      cast(s.f_vertex), 1200.0, physics)
        model.step()
        out[xp] = [cupy.asnumpy(f) if xp is cupy else f for f in (model.mass, model.theta_mass, model.u)]
    for name, a, b in zip(("mass", "theta_mass", "u"), out[np], out[cupy]):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol * np.abs(a).max(), err_msg=name)
