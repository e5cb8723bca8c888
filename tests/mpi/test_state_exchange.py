"""State exchange under MPI: one message per neighbour for a whole state of mixed fields, halo
contents, the adjoint exchange's dot test, the halo layers each operator consumes, and a chain of
operators after ONE exchange: bitwise equal to the global chain on owned rows, and its adjoint
(local adjoints, then ONE adjoint exchange) dot-tested over ranks."""
import numpy as np
import pytest

from adjoint.verification import dot_product_test
from meshops.operators.divergence import div_e2c, div_e2c_adj
from meshops.operators.gradient import grad_c2e, grad_c2e_adj
from meshops.operators.pv_flux import pv_flux_e2e, pv_flux_e2e_adj, pv_flux_e2e_tl
from meshops.modes import ADJOINT_MODES
from meshops.parallel.comm import allreduce_sum
from meshops.parallel.halo import HaloExchange
from meshops.parallel.layers import (HALO_LAYERS, chain_depth, halo_layers, layers_needed, n_valid,
                                     valid_depth)
from meshops.parallel.state import FieldSpec, StateExchange
from meshops.registry import OPERATORS

from .conftest import SIZES, decomposition, global_field, scatter

#: A state of every location, level count and dtype at once.
MIXED = {"h": ("cell", None, np.float64), "u": ("edge", 3, np.float64),
         "zeta": ("vertex", 2, np.float32), "tracer": ("cell", 5, np.float32),
         "mask": ("edge", None, np.int32), "flag": ("vertex", None, np.uint8)}
CHAIN = ["div_e2c", "grad_c2e", "pv_flux_e2e"]


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _global_state(mesh, fields, rng):
    out = {}
    for name, spec in fields.items():
        spec = FieldSpec.of(spec)
        shape = (getattr(mesh, SIZES[spec.location]),) + spec.tail
        if spec.dtype.kind == "f":
            out[name] = rng.standard_normal(shape).astype(spec.dtype)
        else:
            out[name] = rng.integers(0, 100, shape).astype(spec.dtype)
    return out


def _local_state(d, fields, global_state, fill=0):
    return {n: scatter(d, FieldSpec.of(fields[n]).location, g, fill=fill)
            for n, g in global_state.items()}


def _rank_rng(comm, rng):
    """A stream of this rank's own (the shared `rng` stays in step across ranks)."""
    return np.random.default_rng([int(rng.integers(2**32)), comm.Get_rank()])


def _peers_with_rows(d, fields, side):
    """Ranks this rank has rows to send (side "send") or receive from, over the fields' locations."""
    peers = set()
    for spec in fields.values():
        ex = d.exchange[FieldSpec.of(spec).location]
        for i, p in enumerate(ex.peers.tolist()):
            s = ex.send_slice(i) if side == "send" else ex.recv_slice(i)
            if s.stop > s.start:
                peers.add(p)
    return peers


# -- the exchange itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("halo_depth", [1, 2])
def test_state_halo_contents_equal_global_fields(comm, mesh, rng, halo_depth):
    d = decomposition(comm, mesh, halo_depth=halo_depth)
    ex = StateExchange(d, MIXED, comm)
    g = _global_state(mesh, MIXED, rng)
    state = _local_state(d, MIXED, g, fill=0)
    for name, x in state.items():      # garbage in every halo row
        x[d.n_owned(FieldSpec.of(MIXED[name]).location):] = 77
    assert ex.exchange(state) is state
    for name, spec in MIXED.items():
        assert np.array_equal(state[name], g[name][d.local.l2g[spec[0]]]), name


def test_one_message_per_neighbour_each_way(comm, mesh, rng):
    d = decomposition(comm, mesh)
    ex = StateExchange(d, MIXED, comm)
    state = _local_state(d, MIXED, _global_state(mesh, MIXED, rng))
    senders, receivers = _peers_with_rows(d, MIXED, "send"), _peers_with_rows(d, MIXED, "recv")
    for run, out, into in [(ex.exchange, senders, receivers),
                           (ex.exchange_adjoint, receivers, senders)]:
        before = ex.stats.snapshot()
        run(state)
        delta = ex.stats - before
        assert delta.messages_sent == len(out), (run.__name__, delta, out)
        assert delta.messages_received == len(into), (run.__name__, delta, into)
        assert delta.messages_sent <= comm.Get_size() - 1
    total = comm.allreduce(ex.stats.messages_sent) if comm.Get_size() > 1 else 0
    assert total == (comm.allreduce(ex.stats.messages_received) if comm.Get_size() > 1 else 0)
    # exchanged field by field (HaloExchange), the same state costs a message per field
    halo = HaloExchange(d, comm)
    floats = {n: s for n, s in MIXED.items() if np.dtype(s[2]).kind == "f"}
    before = halo.stats.snapshot()
    for name, spec in floats.items():
        halo.exchange(state[name], spec[0])
    per_field = (halo.stats - before).messages_sent
    expected = sum(len(_peers_with_rows(d, {n: s}, "send")) for n, s in floats.items())
    assert per_field == expected >= len(_peers_with_rows(d, floats, "send"))
    if comm.Get_size() > 1:
        assert comm.allreduce(per_field) > comm.allreduce(len(senders))


@pytest.mark.parametrize("fields", [MIXED, {"u": ("edge", 4), "h": "cell", "q": ("vertex", 1)}])
def test_state_adjoint_exchange_dot_product(comm, mesh, rng, fields):
    """<E x, y> over all local rows = <x, E^T y> over owned rows, summed over fields and ranks."""
    fields = {n: s for n, s in fields.items() if np.dtype(FieldSpec.of(s).dtype) == np.float64}
    d = decomposition(comm, mesh)
    ex = StateExchange(d, fields, comm)
    names = list(fields)
    locs = [FieldSpec.of(fields[n]).location for n in names]
    local_rng = _rank_rng(comm, rng)
    x = tuple(local_rng.standard_normal((d.n_local(l),) + FieldSpec.of(fields[n]).tail)
              for n, l in zip(names, locs))
    y = tuple(local_rng.standard_normal(a.shape) for a in x)

    def forward(*xs):
        state = {n: a.copy() for n, a in zip(names, xs)}
        for n, l in zip(names, locs):      # halo input rows are not read
            state[n][d.n_owned(l):] = local_rng.standard_normal(state[n][d.n_owned(l):].shape)
        ex.exchange(state)
        return tuple(state[n] for n in names)

    def adjoint(*ys):
        state = {n: a.copy() for n, a in zip(names, ys)}
        ex.exchange_adjoint(state)
        for n, l in zip(names, locs):
            assert not state[n][d.n_owned(l):].any()
        return tuple(state[n] for n in names)

    def restrict(arrays, side):
        return arrays if side == "range" else tuple(a[: d.n_owned(l)] for a, l in zip(arrays, locs))

    result = dot_product_test(forward, adjoint, x, y, restrict=restrict, allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result


def test_state_adjoint_adds_halo_copies_into_owners(comm, mesh):
    d = decomposition(comm, mesh)
    fields = {"c": ("cell", 2), "e": "edge", "v": ("vertex", None, np.float32)}
    ex = StateExchange(d, fields, comm)
    state = {n: np.ones((d.n_local(FieldSpec.of(s).location),) + FieldSpec.of(s).tail,
                        FieldSpec.of(s).dtype) for n, s in fields.items()}
    ex.exchange_adjoint(state)
    for name, spec in fields.items():
        loc = FieldSpec.of(spec).location
        gids = d.local.l2g[loc]
        copies = np.zeros(getattr(mesh, SIZES[loc]))
        np.add.at(copies, gids, 1.0)
        copies = comm.allreduce(copies) if comm.Get_size() > 1 else copies
        owned = state[name][: d.n_owned(loc)].reshape(d.n_owned(loc), -1)
        assert (owned == copies[gids[: d.n_owned(loc)], None]).all(), name
        assert not state[name][d.n_owned(loc):].any()


def test_begin_end_overlap_and_misuse(comm, mesh, rng):
    d = decomposition(comm, mesh)
    ex = StateExchange(d, MIXED, comm)
    g = _global_state(mesh, MIXED, rng)
    state = _local_state(d, MIXED, g, fill=0)
    pending = ex.begin(state)
    owned_sum = state["h"][: d.n_owned("cell")].sum()          # owned rows readable meanwhile
    with pytest.raises(RuntimeError, match="already in flight"):
        ex.begin(state)
    adjoint_state = _local_state(d, MIXED, g, fill=0)
    adj = ex.begin_adjoint(adjoint_state)                       # both directions may fly at once
    with pytest.raises(RuntimeError, match="exactly one"):
        ex.end()
    ex.end_adjoint()
    assert ex.end() is state
    assert owned_sum == g["h"][d.local.l2g["cell"][: d.n_owned("cell")]].sum()
    for name, spec in MIXED.items():
        assert np.array_equal(state[name], g[name][d.local.l2g[spec[0]]]), name
    with pytest.raises(RuntimeError, match="end\\(\\) called twice"):
        ex.end(pending)
    with pytest.raises(RuntimeError, match="given a forward exchange"):
        ex.end_adjoint(pending)
    assert adj.done


def test_bad_states_and_declarations_are_rejected(comm, mesh):
    d = decomposition(comm, mesh)
    ex = StateExchange(d, {"u": ("edge", 2), "h": "cell"}, comm)
    ne, nc = d.n_local("edge"), d.n_local("cell")
    with pytest.raises(KeyError, match="lacks field"):
        ex.exchange({"u": np.zeros((ne, 2))})
    with pytest.raises(ValueError, match="'u' \\(edge\\): expected shape"):
        ex.exchange({"u": np.zeros(ne), "h": np.zeros(nc)})
    with pytest.raises(TypeError, match="expected dtype float64"):
        ex.exchange({"u": np.zeros((ne, 2), np.float32), "h": np.zeros(nc)})
    with pytest.raises(ValueError, match="C-contiguous"):
        ex.exchange({"u": np.zeros((2, ne)).T, "h": np.zeros(nc)})
    with pytest.raises(ValueError, match="location 'face'"):
        StateExchange(d, {"x": "face"}, comm)
    with pytest.raises(ValueError, match="nlev 0"):
        StateExchange(d, {"x": ("cell", 0)}, comm)
    with pytest.raises(ValueError, match="MESHOPS_HALO_TRANSPORT"):
        StateExchange(d, {"x": "cell"}, comm, transport="carrier-pigeon")
    if comm.Get_size() > 1:
        mine = {"h": "cell"} if comm.Get_rank() else {"h": "edge"}
        with pytest.raises(ValueError, match="same fields in the same order on every rank"):
            StateExchange(d, mine, comm)


def test_the_state_transport_is_logged(comm, mesh, caplog):
    d = decomposition(comm, mesh)
    ex = StateExchange(d, {"h": "cell", "u": "edge"}, comm)
    with caplog.at_level("INFO", logger="meshops.parallel.halo"):
        ex.exchange({"h": np.ones(d.n_local("cell")), "u": np.ones(d.n_local("edge"))})
    expected = "local" if comm.Get_size() == 1 else "mpi"
    assert f"state exchange of 2 fields (NumPy arrays) uses transport '{expected}'" in caplog.text


# -- halo layers per operator ----------------------------------------------------------------------

def test_every_registered_operator_has_a_layer_count():
    horizontal = {n: s for n, s in OPERATORS.items() if not s.vertical}   # columns: no halo
    assert set(HALO_LAYERS) == set(horizontal)
    for name, spec in horizontal.items():
        assert spec.halo_depth == max(HALO_LAYERS[name], 1), name     # owned rows need r layers
    assert layers_needed(CHAIN) == 2
    assert chain_depth(CHAIN, 2) == 0 and chain_depth(CHAIN, 1) == -1
    assert valid_depth("div_e2c", 2) == 2 and valid_depth("div_e2c", 0) == -1
    assert valid_depth("pv_flux_e2e", 1, 3) == 0 and halo_layers("del4_e2e") == 2
    assert layers_needed(["del4_c2c", "laplacian_c2c"]) == 3


@pytest.mark.parametrize("name", sorted(n for n, s in OPERATORS.items() if not s.vertical))
def test_operator_consumes_exactly_its_halo_layers(comm, mesh, rng, name):
    """Inputs valid to depth k (later rows NaN): outputs are valid (bitwise equal to the global
    operator) to depth valid_depth(name, k), and, over the ranks, not one layer further."""
    spec = OPERATORS[name]
    H = 3
    d = decomposition(comm, mesh, halo_depth=H)
    xg = [global_field(mesh, loc, rng, 2) for loc in spec.domain]
    ref = _tuple(spec.forward(mesh, *xg))
    for k in range(0, H + 1):
        x = []
        for loc, g in zip(spec.domain, xg):
            a = np.ascontiguousarray(g[d.local.l2g[loc]])
            a[n_valid(d, loc, k):] = np.nan
            x.append(a)
        with np.errstate(invalid="ignore"):
            out = _tuple(spec.forward(d.mesh, *x))
        depth = valid_depth(name, k)
        further = False
        for y, r, loc in zip(out, ref, spec.range, strict=True):
            n = n_valid(d, loc, depth)
            assert np.array_equal(y[:n], r[d.local.l2g[loc][:n]]), (name, k, loc, depth)
            if depth + 1 <= H:
                m = n_valid(d, loc, depth + 1)
                further |= bool(np.array_equal(y[:m], r[d.local.l2g[loc][:m]]))
        # one layer further is wrong somewhere (the table is tight), where such rows exist
        wrong_somewhere = comm.allreduce(int(not further)) if comm.Get_size() > 1 else 0
        if comm.Get_size() > 1 and depth + 1 <= H and mesh.nCells > 600:
            assert wrong_somewhere > 0, (name, k, depth)


# -- a chain of operators after one exchange -------------------------------------------------------

def _chain(mesh, F, q):
    return pv_flux_e2e(mesh, grad_c2e(mesh, div_e2c(mesh, F)), q)


@pytest.mark.parametrize("nlev", [None, 3])
def test_chain_after_one_exchange_bitwise_equals_global(comm, mesh, rng, nlev):
    d = decomposition(comm, mesh, halo_depth=layers_needed(CHAIN))
    fields = {"F": ("edge", nlev), "q": ("edge", nlev)}
    ex = StateExchange(d, fields, comm)
    F, q = global_field(mesh, "edge", rng, nlev), global_field(mesh, "edge", rng, nlev)
    state = {"F": scatter(d, "edge", F), "q": scatter(d, "edge", q)}      # halo rows NaN
    before = ex.stats.snapshot()
    ex.exchange(state)
    assert (ex.stats - before).messages_sent == len(_peers_with_rows(d, fields, "send"))
    y = _chain(d.mesh, state["F"], state["q"])
    n = d.n_owned("edge")
    assert n == n_valid(d, "edge", chain_depth(CHAIN, d.halo_depth))
    assert np.array_equal(y[:n], _chain(mesh, F, q)[d.local.l2g["edge"][:n]])


@pytest.mark.parametrize("mode", ADJOINT_MODES)
@pytest.mark.parametrize("nlev", [None, 3])
def test_adjoint_chain_after_one_adjoint_exchange_dot_product(comm, mesh, rng, nlev, mode):
    """x = (dF, dq) owned -> E (one state exchange) -> dy = pv_flux_tl(G, q; grad(div(dF)), dq) ->
    owned rows; adjoint: zero halo rows of dy_adj, local adjoints in reverse order, ONE adjoint
    state exchange. Inner products over owned rows summed across ranks."""
    d = decomposition(comm, mesh, halo_depth=layers_needed(CHAIN))
    fields = {"F": ("edge", nlev), "q": ("edge", nlev)}
    ex = StateExchange(d, fields, comm)
    base = {"F": scatter(d, "edge", global_field(mesh, "edge", rng, nlev)),
            "q": scatter(d, "edge", global_field(mesh, "edge", rng, nlev))}
    ex.exchange(base)
    G = grad_c2e(d.mesh, div_e2c(d.mesh, base["F"]))
    n = d.n_owned("edge")
    local_rng = _rank_rng(comm, rng)
    tail = () if nlev is None else (nlev,)

    def fresh():
        return local_rng.standard_normal((d.n_local("edge"),) + tail)

    def forward(dF, dq):
        state = {"F": dF.copy(), "q": dq.copy()}
        state["F"][n:] = np.nan                         # halo rows come from the exchange
        state["q"][n:] = np.nan
        ex.exchange(state)
        dy = pv_flux_e2e_tl(d.mesh, G, base["q"], grad_c2e(d.mesh, div_e2c(d.mesh, state["F"])),
                            state["q"])
        dy[n:] = 0
        return dy

    messages = []

    def adjoint(dy):
        dy = dy.copy()
        dy[n:] = 0                                      # P^T
        G_adj, q_adj = pv_flux_e2e_adj(d.mesh, G, base["q"], dy, mode=mode)
        F_adj = div_e2c_adj(d.mesh, grad_c2e_adj(d.mesh, G_adj, mode=mode), mode=mode)
        state = {"F": np.ascontiguousarray(F_adj), "q": np.ascontiguousarray(q_adj)}
        before = ex.stats.snapshot()
        ex.exchange_adjoint(state)
        messages.append((ex.stats - before).messages_sent)
        return state["F"], state["q"]

    def restrict(arrays, side):
        return tuple(a[:n] for a in arrays)

    result = dot_product_test(forward, adjoint, (fresh(), fresh()), fresh(), restrict=restrict,
                              allreduce=allreduce_sum(comm))
    assert result.relative_error <= 1e-12, result
    assert messages == [len(_peers_with_rows(d, fields, "recv"))]
