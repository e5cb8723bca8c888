"""The shallow-water model on 1-4 ranks: the state after a run equals one process's bitwise (one
state exchange per RK stage, the halo depth its tendencies need), with and without APVM and
hyperviscosity, on the operator path and on the fused kernels (swm.fused, compiled for the host)."""
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
                  distribution=dist)
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


class HostExchange:
    """A rank's state exchange of host-harness arrays (the MPI transport reads NumPy arrays)."""

    def __init__(self, dist):
        self.dist = dist

    def exchange(self, h, u):
        self.dist.exchange(np.asarray(h), np.asarray(u))


def test_fused_run_on_ranks_is_bitwise_one_process(comm, ico_mesh, tmp_path):
    """The fused RK4 kernels, compiled for the host (tests/meshops/host_harness.py): 6 steps on
    the ranks equal one process's fused steps bitwise and the NumPy operator path to 1e-12."""
    from tests.meshops.host_harness import compile_families, host, route_to_host

    mesh, dt, steps, physics = ico_mesh, 1800.0, 6, Physics()
    state = testcases.williamson5(mesh)
    reference = Model(mesh, state.h.copy(), state.u.copy(), state.b, state.f_vertex, dt, physics)
    d = decomposition(comm, mesh, halo_depth=halo_depth(physics))
    dist = Distributed(d, comm, np.float64)
    fields = {name: dist.scatter(loc, getattr(state, name) if comm.Get_rank() == 0 else None)
              for name, loc in (("h", "cell"), ("u", "edge"), ("b", "cell"), ("f_vertex", "vertex"))}
    with route_to_host(compile_families(tmp_path, ["shallow_water"]), ["shallow_water"]) as launches:
        whole = Model(mesh, *(host(getattr(state, n)) for n in ("h", "u", "b", "f_vertex")), dt,
                      physics, fused=True)
        model = Model(d.mesh, *(host(fields[n]) for n in ("h", "u", "b", "f_vertex")), dt, physics,
                      distribution=HostExchange(dist), fused=True)
        for _ in range(steps):
            reference.step()
            whole.step()
            model.step()
    assert launches["shallow_water"].count("sw_edge_stage") == 2 * 4 * steps
    h, u = dist.gather("cell", np.asarray(model.h)), dist.gather("edge", np.asarray(model.u))
    if comm.Get_rank() == 0:
        assert np.array_equal(h, whole.h) and np.array_equal(u, whole.u)
        for got, ref in ((h, reference.h), (u, reference.u)):
            assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()
