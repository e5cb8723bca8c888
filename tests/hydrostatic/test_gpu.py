"""The hydrostatic core on CuPy (skipped without CuPy and a CUDA device): one RK4 step of the
operator path equals NumPy's to round-off, in float64 and float32, with the Held-Suarez forcing
and del4 dissipation on; the initial state formed on the GPU is NumPy's bitwise; 2 and 3 ranks
sharing one GPU write the one rank's history (fused stages) and gradient file, bitwise."""
import netCDF4
import numpy as np
import pytest
import yaml

from grids.cache import cached_icosahedral
from hydrostatic import levels, testcases
from hydrostatic.dynamics import Physics
from hydrostatic.forcing import HeldSuarez
from hydrostatic.model import Model
from tests.swm.test_driver_gpu import run

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


@pytest.mark.parametrize("case, alpha", [("jw06_baroclinic", 45.0), ("jw06_steady", 0.0)])
def test_the_state_formed_on_the_gpu_is_numpys_bitwise(case, alpha):
    """`testcases.state_fields` on CuPy (what a run forms on its device from the rows' factors)
    equals the NumPy state bitwise."""
    import cupy

    mesh = cached_icosahedral(4, lloyd_iterations=50)
    A, B = levels.coefficients()
    rows = testcases.row_factors(mesh, case, alpha)
    layers = testcases.layer_factors(A, B, mesh.sphere_radius)
    host = testcases.state_fields(rows, layers, mesh.dvEdge)
    device = testcases.state_fields(rows, layers, mesh.dvEdge, cupy)
    for name in ("mass", "theta_mass", "u", "phi_s", "f_vertex"):
        got = cupy.asnumpy(getattr(device, name))
        assert np.array_equal(got.view(np.uint64), getattr(host, name).view(np.uint64)), name


def sharing_config(tmp_path, name, sensitivity: bool):
    """The JW06 wave at level 3 on CuPy with the fused stages, for 12 hours: a history, or with
    `sensitivity` the gradient of the box-mean surface pressure."""
    tree = {"model": "hydrostatic", "mesh": {"generate": {"level": 3, "lloyd": 20}},
            "case": {"name": "jw06_baroclinic"}, "time": {"days": 0.5, "dt": 1800},
            "backend": "cupy", "dynamics": {"fused": True}, "diffusion": {"visc4": 1.0e16},
            "output": {"path": str(tmp_path / f"{name}.history.nc"), "interval_hours": 6},
            "restart": {"path": str(tmp_path / f"{name}.restart.nc"), "interval_hours": 12}}
    if sensitivity:
        tree["sensitivity"] = {"cost": {"kind": "surface_pressure",
                                        "box": {"lat": [35, 65], "lon": [40, 120]}},
                               "controls": ["theta", "u", "surface_pressure"],
                               "output": str(tmp_path / f"{name}.nc")}
        del tree["restart"]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def variables(path, names):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: ds[name][:] for name in names}


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_sharing_one_gpu_equal_one_rank_bitwise(tmp_path, ranks):
    import cupy

    if cupy.cuda.runtime.getDeviceCount() >= ranks:
        pytest.skip(f"{ranks} ranks get {ranks} GPUs here: nothing is shared")
    for name, sensitivity, file, names in (
            ("forward", False, "{}.history.nc", ("surface_pressure", "theta", "uReconstructZonal", "Time")),
            ("gradient", True, "{}.nc", ("J", "dJdtheta0", "dJdu0", "dJdps0"))):
        said = "dynamics: fused stages" if sensitivity else "backend cupy float64, fused stages;"
        for label, n in (("one", None), ("many", ranks)):
            out = run(tmp_path, sharing_config(tmp_path, f"{label}_{name}", sensitivity), ranks=n)
            assert said in out.stderr, (label, name, out.stderr[-2000:])
        one = variables(tmp_path / file.format(f"one_{name}"), names)
        many = variables(tmp_path / file.format(f"many_{name}"), names)
        for field in names:
            assert np.array_equal(one[field], many[field]), (name, field)
