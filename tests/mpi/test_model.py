"""The shallow-water model on 1-4 ranks: the state after a run equals one process's bitwise (one
state exchange per RK stage, the halo depth its tendencies need), with and without APVM and
hyperviscosity."""
import numpy as np
import pytest

from swm import testcases
from swm.distribution import Distributed, halo_depth
from swm.model import Model
from swm.tendencies import Physics

from .conftest import decomposition


@pytest.mark.parametrize("case, physics", [
    ("williamson5", Physics()),
    ("galewsky", Physics(apvm=0.5, visc4=1e15)),
    ("williamson6", Physics(visc2=1e5)),
])
def test_run_on_ranks_is_bitwise_one_process(comm, ico_mesh, case, physics):
    mesh, dt, steps = ico_mesh, 1800.0, 12
    state = testcases.CASES[case](mesh)
    reference = Model(mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, dt, physics)
    for _ in range(steps):
        reference.step()
    d = decomposition(comm, mesh, halo_depth=halo_depth(physics))
    dist = Distributed(d, comm, np.float64)
    fields = {name: dist.scatter(loc, getattr(state, name) if comm.Get_rank() == 0 else None)
              for name, loc in (("h", "cell"), ("u", "edge"), ("b", "cell"), ("f_vertex", "vertex"))}
    model = Model(d.mesh, fields["h"], fields["u"], fields["b"], fields["f_vertex"], dt, physics,
                  exchange=dist.exchange)
    messages = dist.state_exchange.stats.messages_sent
    for _ in range(steps):
        model.step()
    sent = dist.state_exchange.stats.messages_sent - messages
    assert sent == 4 * steps * len(dist.state_exchange.neighbours)   # one message per stage and neighbour
    h, u = dist.gather("cell", model.h), dist.gather("edge", model.u)
    if comm.Get_rank() == 0:
        assert np.array_equal(h, reference.h) and np.array_equal(u, reference.u)


def test_halo_depth_of_the_tendencies():
    assert halo_depth(Physics()) == 2
    assert halo_depth(Physics(visc4=1.0)) == 2
    assert halo_depth(Physics(apvm=0.5)) == 3
