"""The hydrostatic costs (hydrostatic.costs) on 1-4 ranks: the value and the gathered gradient of
each cost equal one process's bitwise, on states whose halo rows are NaN (a cost exchanges what
it reads there), and the gradients' halo rows are zero."""
import pathlib
import tempfile

import numpy as np
import pytest

from adjoint.costs import Context
from grids.cache import cached_icosahedral
from meshops.parallel import gather_field

from hydrostatic.costs import (KineticEnergyCost, MinimumSurfacePressureCost, ObservationCost,
                               SurfacePressureCost, Temperature850Cost, temperature,
                               write_observations)
from hydrostatic.distribution import Distributed, halo_depth

from ..hydrostatic.test_costs import BOX, DT, N_STEPS, PHYSICS, jw06_like
from ..hydrostatic.test_costs import context as serial_context
from .conftest import decomposition, scatter

STATE = ("cell", "cell", "edge")


@pytest.fixture(scope="module")
def mesh():
    return cached_icosahedral(3, lloyd_iterations=50)


def _costs(ctx, obs):
    return {"surface_pressure": SurfacePressureCost(ctx, PHYSICS, BOX, (0.0, 1.0), "cost"),
            "minimum_surface_pressure": MinimumSurfacePressureCost(ctx, PHYSICS, BOX, (0.0, 1.0),
                                                                   200.0, "cost"),
            "kinetic_energy": KineticEnergyCost(ctx, PHYSICS, BOX, None, (2, 20), 26, "cost"),
            "temperature_850hPa": Temperature850Cost(ctx, PHYSICS, BOX, None, "cost"),
            "misfit": ObservationCost(ctx, PHYSICS, 26, obs)}


@pytest.mark.parametrize("kind", ["surface_pressure", "minimum_surface_pressure", "kinetic_energy",
                                  "temperature_850hPa", "misfit"])
def test_costs_on_ranks_are_one_process_bitwise(comm, mesh, rng, kind):
    from hydrostatic import testcases
    from ..hydrostatic.test_costs import A, B

    x = jw06_like(mesh, testcases.initial_state(mesh, "jw06_baroclinic", A, B), rng)
    folder = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    obs = pathlib.Path(folder) / "obs.nc"
    if comm.Get_rank() == 0:
        T = temperature(mesh, x[0], x[1], PHYSICS)[2]
        cells = rng.choice(mesh.nCells, 60, replace=False)
        levels = np.arange(60) % 26
        write_observations(obs, (cells, np.full(60, DT), np.full(60, 1.0e5), np.full(60, 200.0)),
                           (cells, levels, np.full(60, 2 * DT), T[cells, levels] + 1.0,
                            np.full(60, 0.5)))
    comm.barrier()
    serial = _costs(serial_context(mesh), obs)[kind]

    d = decomposition(comm, mesh, method="metis", halo_depth=halo_depth())
    dist = Distributed(d, comm, np.float64, 26)
    ctx = Context(d.mesh, d.mesh, dist.owned, d.local.l2g["cell"][:dist.owned["cell"]], comm, DT,
                  N_STEPS, dist.exchange, np, np.float64)
    cost = _costs(ctx, obs)[kind]
    local = [scatter(d, loc, a) for loc, a in zip(STATE, x)]
    assert cost.steps == serial.steps
    for k in sorted(cost.steps):
        assert cost.value(k, local) == serial.value(k, x)
        grads = cost.gradient(k, local)
        for g, loc, expected in zip(grads, STATE, serial.gradient(k, x)):
            assert np.all(g[dist.owned[loc]:] == 0)
            gathered = gather_field(d, comm, g, loc)
            if comm.Get_rank() == 0:
                assert np.array_equal(gathered, expected)
    comm.barrier()
