"""What the hydrostatic core tells its user, for real through run_model.py on level-2 meshes:

- at start, the Courant number of the fastest wave, a suggested dt and the diffusion's stable
  limit (hydrostatic.stability), a warning naming time.dt above the limit; lambda_max of del4
  against the eigenvalues of the operator's matrix;
- a daily line (min p_s, max |u|, total energy and mass), once a day;
- a watchdog stop caused by too much diffusion names diffusion.visc4 and its largest stable
  value (not "more diffusion"), and is logged once under 2 ranks;
- misleading messages of the issue: a truncated restart (not advised to be removed), a
  shallow-water restart given to the 3D core (called so), a config without `model:` (named, with
  the models), too many ranks (the rank and cell counts), a sensitivity run with restart.resume
  (refused, naming it)."""
import re

import numpy as np
import pytest
import yaml

from tests.hydrostatic.test_run import config
from tests.swm.test_faults import make_config, ok, refused, run_model, snapshot


def _lines(out, word):
    return [line for line in out.stderr.splitlines() if word in line]


def test_start_log_gives_the_cfl_and_a_suggested_dt(tmp_path):
    rng = np.random.default_rng()
    dt = float(rng.choice([600, 900, 1200, 1800]))
    out = ok(run_model(config(tmp_path, "cfl", time={"days": 0.125, "dt": dt}, output={
        "interval_hours": 3, "variables": ["theta"]})))
    [line] = _lines(out, "time step: dt")
    found = re.search(r"CFL ([0-9.]+) \(stable up to 1.45\) of the fastest wave (\d+) m/s \(Lamb "
                      r"wave sqrt\(gamma R T\) (\d+) m/s \+ max \|u\| ([0-9.]+) m/s\) on the "
                      r"smallest dcEdge ([0-9.]+) km; suggested dt <= ([0-9.]+) s", line)
    cfl, speed, lamb, wind, dc, suggested = map(float, found.groups())
    assert 330 < lamb < 360 and 30 < wind < 40                 # JW06: T up to 310 K, a 35 m/s jet
    assert cfl == pytest.approx(speed * dt / (dc * 1e3), rel=5e-3)
    assert suggested * speed / (dc * 1e3) <= 1.45 * 1.003 and 10800 % suggested == 0
    assert not _lines(out, "above the stable limit")

    big = 10800.0                                               # CFL about 2.4
    out = run_model(config(tmp_path, "big", time={"days": 0.125, "dt": big},
                           output={"interval_hours": 3, "variables": ["theta"]}))
    [warning] = _lines(out, "is above the stable limit")
    assert re.search(rf"time.dt = {big:g} s is above the stable limit: CFL [0-9.]+ > 1.45 .*; "
                     rf"expected time.dt <= {suggested:g} s \(suggested\)", warning), warning


def test_lambda_max_of_del4_is_the_largest_eigenvalue(tmp_path):
    """The power iteration's lambda_max of del4_e2e and del4_c2c on a real level-2 mesh against
    the eigenvalues of the operators' matrices."""
    import meshops
    from grids.cache import cached_icosahedral
    from hydrostatic.distribution import Serial
    from hydrostatic.stability import lambda_max
    from meshops.parallel.comm import SerialComm

    mesh = cached_icosahedral(2, lloyd_iterations=20, sphere_radius=6371229.0,
                              cache_dir=tmp_path)
    dm = meshops.device_mesh(mesh, np)
    dist = Serial(mesh, SerialComm())
    for operator, n, location in ((meshops.del4_e2e, mesh.nEdges, "edge"),
                                  (meshops.del4_c2c, mesh.nCells, "cell")):
        matrix = np.stack([operator(dm, e[:, None])[:, 0] for e in np.eye(n)], axis=1)
        exact = np.abs(np.linalg.eigvals(matrix)).max()
        estimate = lambda_max(dist, lambda v, op=operator: op(dm, v), location, np, columns=3)
        assert 0.9 * exact <= estimate <= exact * (1 + 1e-9), (location, estimate, exact)


def test_the_daily_line_reports_once_a_day(tmp_path):
    out = ok(run_model(config(tmp_path, "daily", time={"days": 2, "dt": 1800},
                              output={"interval_hours": 24, "variables": ["theta"]})))
    lines = _lines(out, "min p_s")
    assert len(lines) == 3, out.stderr                          # days 0, 1 and 2
    rows = [re.search(r"day ([0-9.]+): min p_s ([0-9.]+) hPa, max \|u\| ([0-9.]+) m/s, total "
                      r"energy ([0-9.e+]+) J, total mass ([0-9.e+]+) kg", line).groups()
            for line in lines]
    days, ps, wind, energy, mass = np.array(rows, dtype=float).T
    np.testing.assert_array_equal(days, [0, 1, 2])
    assert ps[0] == pytest.approx(1000.0, abs=0.01) and (ps[1:] < 1000.0).all() and (ps > 950).all()
    assert ((wind > 30) & (wind < 60)).all()
    np.testing.assert_allclose(mass, mass[0], rtol=1e-10)       # mass is conserved
    np.testing.assert_allclose(energy, energy[0], rtol=1e-3)    # energy nearly so
    assert 1e24 < energy[0] < 2e24 and 5.0e18 < mass[0] < 5.3e18


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_too_much_diffusion_is_named_with_its_largest_stable_value(tmp_path, ranks):
    probe = ok(run_model(config(tmp_path, "probe")))
    [line] = _lines(probe, "diffusion: dt visc4 lambda_max")
    largest = float(re.search(r"diffusion.visc4 <= ([0-9.e+]+)\)", line)[1])
    visc4 = largest * float(np.random.default_rng().uniform(5.0, 20.0))
    out = run_model(config(tmp_path, "much", diffusion={"visc4": visc4},
                           time={"days": 1, "dt": 1800}), ranks=ranks)
    text = refused(out, 3, f"diffusion.visc4 = {visc4:.4g} is above the stable limit for "
                           "time.dt = 1800 s", f"expected diffusion.visc4 <= {largest:.3g}")
    assert "more diffusion" not in text and "(1-based as in MPAS;" in text
    assert len(_lines(out, "is above the stable limit")) == 2      # the start's warning, the stop
    assert len(_lines(out, "was written to")) == 1                  # once, not once per rank


# -- misleading messages ---------------------------------------------------------------------------

def test_a_truncated_restart_is_named_and_not_to_be_removed(tmp_path):
    path = config(tmp_path, "cut", restart={"interval_hours": 1.5})
    ok(run_model(path))
    restart = tmp_path / "cut.restart.nc"
    data = restart.read_bytes()
    restart.write_bytes(data[:int(len(data) * np.random.default_rng().uniform(0.2, 0.9))])
    before = snapshot(restart, tmp_path / "cut.nc")
    line = refused(run_model(path, "--set", "restart.resume=true", "--set", "time.days=0.25"), 2,
                   "restart.path = ", str(restart), "cannot be read as netCDF", "truncated")
    assert "remove" not in line
    assert snapshot(restart, tmp_path / "cut.nc") == before


def test_a_shallow_water_restart_is_called_so(tmp_path):
    sw = make_config(tmp_path, "sw", restart={"interval_hours": 24})
    ok(run_model(sw))
    path = config(tmp_path, "core", restart={"path": str(tmp_path / "sw.restart.nc")})
    line = refused(run_model(path, "--set", "restart.resume=true"), 2, "restart.path = ",
                   "not a restart file of this model", "a restart of the shallow-water model",
                   "core_name = 'sw'", "mass, theta_mass, u")
    assert "history" not in line


def test_a_config_without_model_names_the_missing_key_and_the_models(tmp_path):
    tree = yaml.safe_load(config(tmp_path, "nomodel").read_text())
    del tree["model"]
    path = tmp_path / "nomodel.yaml"
    path.write_text(yaml.safe_dump(tree))
    line = refused(run_model(path), 2, "model: missing", "case.name = 'jw06_baroclinic'",
                   "expected model: hydrostatic", "shallow_water, hydrostatic")
    assert "invalid setting" not in line and "\n" not in line


def test_too_many_ranks_name_the_rank_and_cell_counts(tmp_path):
    from grids.cache import cached_icosahedral
    from meshops.parallel.comm import SerialComm
    from framework.errors import ConfigError
    from swm.distribution import check_rank_count

    mesh = cached_icosahedral(0, sphere_radius=6371229.0, cache_dir=tmp_path)
    ranks = int(np.random.default_rng().integers(13, 200))

    class Ranks(SerialComm):                 # rank 0 of `ranks` (the check runs on rank 0)
        def Get_size(self):
            return ranks
    with pytest.raises(ConfigError) as err:
        check_rank_count(Ranks(), mesh)
    assert str(err.value) == (f"{ranks} MPI ranks for a mesh of 12 cells: each rank owns at least "
                              "one cell; expected at most 12 ranks (mpiexec -n), or a finer mesh")
    check_rank_count(type("Twelve", (SerialComm,), {"Get_size": lambda self: 12})(), mesh)


def test_a_sensitivity_run_with_resume_is_refused_naming_it(tmp_path):
    tree = yaml.safe_load(config(tmp_path, "sens").read_text())
    tree["sensitivity"] = {"cost": {"kind": "surface_pressure"},
                           "output": str(tmp_path / "sens.grad.nc")}
    tree["restart"]["resume"] = True
    path = tmp_path / "sens.yaml"
    path.write_text(yaml.safe_dump(tree))
    line = refused(run_model(path), 2, "restart.resume", "sensitivity run starts from the case's "
                   "initial state", "dJ/dtheta0")
    assert line.startswith(f"run_model.py: error: {path}: 1 invalid setting(s):")
