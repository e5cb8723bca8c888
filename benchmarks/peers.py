"""The meshops operators written as a competent JAX or PyTorch user would write them.

Each peer gathers through the padded MPAS connectivity, with the padding masks folded into the
coefficients once on the host (missing neighbours point at entry 0 with coefficient 0), multiplies and
sums over the slot axis:  out[i] = sum_j coef[i, j] * x[idx[i, j]]  (`x[idx] * coef`, `.sum(1)`).
Composite operators compose these gathers. Adjoints come from the framework's reverse mode:
JAX `jax.jit` of `jax.vjp`; PyTorch autograd (eager, and `torch.compile` with its compiled backward).
Peers cover operators with one output; `adjoint(x, g)` takes that output's cotangent `g`.

`PEERS[name]` is a function `(mesh) -> (consts, fn)`: `consts` a dict of NumPy arrays (float64
coefficients, integer indices), `fn(ops, c, *x)` the forward, written once for both frameworks with
`ops` giving the few framework-specific pieces. An operator without an entry has no peer.
"""
from __future__ import annotations

import numpy as np

# -- stencils: (index, coefficient) pairs with the padding folded into the coefficient ------------


def _stencil(idx, coef, count=None):
    idx = np.asarray(idx)
    valid = idx >= 0
    if count is not None:
        valid &= np.arange(idx.shape[1])[None, :] < np.asarray(count)[:, None]
    return np.where(valid, idx, 0), np.where(valid, coef, 0.0)


def _div(m):
    eoc = np.where(m.edgesOnCell >= 0, m.edgesOnCell, 0)
    return _stencil(m.edgesOnCell, m.edgeSignOnCell * m.dvEdge[eoc] / m.areaCell[:, None], m.nEdgesOnCell)


def _ke(m):
    eoc = np.where(m.edgesOnCell >= 0, m.edgesOnCell, 0)
    kw = 0.25 * m.dcEdge * m.dvEdge
    return _stencil(m.edgesOnCell, kw[eoc] / m.areaCell[:, None], m.nEdgesOnCell)


def _grad_c(m):
    return _stencil(m.cellsOnEdge, np.array([-1.0, 1.0]) / m.dcEdge[:, None])


def _grad_v(m):
    return _stencil(m.verticesOnEdge, np.array([-1.0, 1.0]) / m.dvEdge[:, None])


def _circulation(m):
    eov = np.where(m.edgesOnVertex >= 0, m.edgesOnVertex, 0)
    return _stencil(m.edgesOnVertex, m.edgeSignOnVertex * m.dcEdge[eov])


def _curl(m):
    idx, coef = _circulation(m)
    return idx, coef / m.areaTriangle[:, None]


def _mean2(idx):
    return _stencil(idx, np.full(idx.shape, 0.5))


def _c2v(m):
    return _stencil(m.cellsOnVertex, m.kiteAreasOnVertex / m.areaTriangle[:, None])


def _v2c(m):
    voc = np.where(m.verticesOnCell >= 0, m.verticesOnCell, 0)
    cells = np.arange(m.nCells)[:, None, None]
    kite = (m.kiteAreasOnVertex[voc] * (m.cellsOnVertex[voc] == cells)).sum(-1)
    return _stencil(m.verticesOnCell, kite / m.areaCell[:, None], m.nEdgesOnCell)


def _tangential(m):
    return _stencil(m.edgesOnEdge, m.weightsOnEdge, m.nEdgesOnEdge)


# -- forwards, one per operator --------------------------------------------------------------------


def _col(c, x):
    """Coefficient array broadcast against a gathered field of shape (n, K) or (n, K, nlev)."""
    return c if x.ndim == 1 else c[..., None]


def gather(x, idx, coef):
    """sum_j coef[i, j] * x[idx[i, j]] for x of shape (n,) or (n, nlev)."""
    return (x[idx] * _col(coef, x)).sum(1)


def _consts(**stencils):
    out = {}
    for name, (idx, coef) in stencils.items():
        out[f"{name}_idx"], out[f"{name}_coef"] = idx, coef
    return out


def _g(c, name, x):
    return gather(x, c[f"{name}_idx"], c[f"{name}_coef"])


def _single(builder):
    def peer(mesh):
        return _consts(s=builder(mesh)), lambda c, x: _g(c, "s", x)
    return peer


def _flux_div(mesh):
    return _consts(s=_div(mesh)), lambda c, h, u: _g(c, "s", h * u)


def _ke_e2c(mesh):
    return _consts(s=_ke(mesh)), lambda c, u: _g(c, "s", u * u)


def pv_flux(F, q, idx, w):
    """sum_j w[e, j] * F[idx[e, j]] * (q[e] + q[idx[e, j]]) / 2 (TRiSK's PV flux)."""
    qe = q[:, None] if q.ndim == 1 else q[:, None, :]
    return (_col(w, F) * F[idx] * 0.5 * (qe + q[idx])).sum(1)


def _pv_flux(mesh):
    return _consts(s=_tangential(mesh)), lambda c, F, q: pv_flux(F, q, c["s_idx"], c["s_coef"])


def _laplacian(c, x):
    return _g(c, "div", _g(c, "grad", x))


def _laplacian_c2c(mesh):
    return _consts(div=_div(mesh), grad=_grad_c(mesh)), _laplacian


def _del4_c2c(mesh):
    return _consts(div=_div(mesh), grad=_grad_c(mesh)), lambda c, x: _laplacian(c, _laplacian(c, x))


def _vector_laplacian(c, u):
    return _g(c, "grad", _g(c, "div", u)) - _g(c, "gradv", _g(c, "curl", u))


def _vector_consts(mesh):
    return _consts(div=_div(mesh), grad=_grad_c(mesh), curl=_curl(mesh), gradv=_grad_v(mesh))


def _vector_laplacian_e2e(mesh):
    return _vector_consts(mesh), _vector_laplacian


def _del4_e2e(mesh):
    return _vector_consts(mesh), lambda c, u: _vector_laplacian(c, _vector_laplacian(c, u))


PEERS = {
    "div_e2c": _single(_div),
    "flux_div_e2c": _flux_div,
    "grad_c2e": _single(_grad_c),
    "grad_v2e": _single(_grad_v),
    "curl_e2v": _single(_curl),
    "circulation_e2v": _single(_circulation),
    "interp_c2e": _single(lambda m: _mean2(m.cellsOnEdge)),
    "interp_v2e": _single(lambda m: _mean2(m.verticesOnEdge)),
    "interp_c2v": _single(_c2v),
    "interp_v2c": _single(_v2c),
    "tangential_e2e": _single(_tangential),
    "ke_e2c": _ke_e2c,
    "pv_flux_e2e": _pv_flux,
    "laplacian_c2c": _laplacian_c2c,
    "del4_c2c": _del4_c2c,
    "vector_laplacian_e2e": _vector_laplacian_e2e,
    "del4_e2e": _del4_e2e,
}


# -- frameworks ---------------------------------------------------------------------------------------


def available_frameworks() -> list[str]:
    """Peer frameworks installed here: "jax", "torch", "torch.compile"."""
    import importlib.util

    names = ["jax"] if importlib.util.find_spec("jax") is not None else []
    if importlib.util.find_spec("torch") is not None:
        names += ["torch", "torch.compile"]
    return names


class JaxPeer:
    """`jax.jit` forward, `jax.jit(jax.vjp)` adjoint and forward+adjoint, on JAX's default device."""

    name = "jax"

    def __init__(self, consts: dict, fn, dtype, xp):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp, self.xp = jax, jnp, xp
        self.c = {k: jnp.asarray(v.astype(dtype) if v.dtype.kind == "f" else v.astype(np.int32))
                  for k, v in consts.items()}

        def vjp(c, xs, g):
            y, pullback = jax.vjp(lambda *x: fn(c, *x), *xs)
            return y, pullback(g)

        self._fwd = jax.jit(fn)
        self._adj = jax.jit(lambda c, xs, g: vjp(c, xs, g)[1])
        self._both = jax.jit(vjp)

    def inputs(self, arrays):
        if self.xp is np:
            return tuple(self.jnp.asarray(a) for a in arrays)
        return tuple(self.jnp.from_dlpack(a) for a in arrays)

    def forward(self, x):
        return lambda: self._fwd(self.c, *x)

    def adjoint(self, x, g):
        return lambda: self._adj(self.c, x, g)

    def forward_adjoint(self, x, g):
        return lambda: self._both(self.c, x, g)

    def to_backend(self, a):
        return np.asarray(a) if self.xp is np else self.xp.from_dlpack(a)

    def sync(self, result):
        self.jax.block_until_ready(result)


class TorchPeer:
    """PyTorch indexing + autograd, eager or through `torch.compile` (compiled forward and backward)."""

    def __init__(self, consts: dict, fn, dtype, xp, compiled: bool):
        import torch

        self.torch, self.xp = torch, xp
        self.name = "torch.compile" if compiled else "torch"
        self.device = "cpu" if xp is np else "cuda"
        tdtype = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
        self.c = {k: (torch.as_tensor(v, dtype=tdtype) if v.dtype.kind == "f"
                      else torch.as_tensor(v, dtype=torch.int64)).to(self.device)
                  for k, v in consts.items()}
        if compiled:  # a fresh compilation per operator and configuration, never a silent eager fallback
            torch._dynamo.reset()
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        self.fn = torch.compile(fn, dynamic=False) if compiled else fn

    def inputs(self, arrays):
        t = self.torch
        return tuple(t.from_numpy(a) if self.xp is np else t.from_dlpack(a) for a in arrays)

    def forward(self, x):
        torch = self.torch

        def run():
            with torch.no_grad():
                return self.fn(self.c, *x)
        return run

    def _graph(self, x):
        leaves = tuple(a.detach().requires_grad_(True) for a in x)
        return leaves, self.fn(self.c, *leaves)

    def adjoint(self, x, g):
        leaves, y = self._graph(x)
        return lambda: self.torch.autograd.grad(y, leaves, g, retain_graph=True)

    def forward_adjoint(self, x, g):
        def run():
            leaves, y = self._graph(x)
            return y, self.torch.autograd.grad(y, leaves, g)
        return run

    def to_backend(self, a):
        a = a.detach()
        return a.numpy() if self.xp is np else self.xp.from_dlpack(a)

    def sync(self, result):
        if self.device == "cuda":
            self.torch.cuda.synchronize()


def make_peer(framework: str, consts: dict, fn, dtype, xp):
    """A peer of one operator in `framework` ("jax", "torch" or "torch.compile")."""
    if framework == "jax":
        return JaxPeer(consts, fn, dtype, xp)
    if framework in ("torch", "torch.compile"):
        return TorchPeer(consts, fn, dtype, xp, compiled=framework == "torch.compile")
    raise ValueError(f"peer framework: expected one of jax, torch, torch.compile, got {framework!r}")


def release(framework: str) -> None:
    """Return cached device memory of `framework` to the device between operators."""
    if framework.startswith("torch"):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
