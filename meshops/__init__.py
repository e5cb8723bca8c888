"""meshops: MPAS-style mesh operators with hand-derived adjoints on NumPy and CuPy.

Every operator infers its backend from its inputs, takes fields of shape (n,) or (n, nlev)
(level index last) in float32 or float64, and treats a connectivity entry < 0 as a missing
neighbour that contributes nothing. `meshops.registry.OPERATORS` lists every operator with its
adjoint (and tangent-linear model for nonlinear operators) and the locations it maps between.
Operators take a mesh (what `meshops.contracts.MeshLike` describes) or a `DeviceMesh`, the tables
of a mesh on one backend and device, built once and shared by every operator (`device_mesh`).
"""
import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("meshops")
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "unknown"
from meshops.device.mesh import DeviceMesh, device_mesh
from meshops.modes import adjoint_mode, get_adjoint_mode, set_adjoint_mode
from meshops.registry import OPERATORS, register
from meshops.operators.divergence import div_e2c, div_e2c_adj, flux_div_e2c, flux_div_e2c_adj, flux_div_e2c_tl
from meshops.operators.gradient import grad_c2e, grad_c2e_adj, grad_v2e, grad_v2e_adj
from meshops.operators.curl import circulation_e2v, circulation_e2v_adj, curl_e2v, curl_e2v_adj
from meshops.operators.interpolation import (interp_c2e, interp_c2e_adj, interp_c2v, interp_c2v_adj, interp_v2c,
                                   interp_v2c_adj, interp_v2e, interp_v2e_adj)
from meshops.operators.tangential import tangential_e2e, tangential_e2e_adj
from meshops.operators.kinetic_energy import ke_e2c, ke_e2c_adj, ke_e2c_tl, ke_e2v, ke_e2v_adj, ke_e2v_tl
from meshops.operators.pv_flux import pv_flux_e2e, pv_flux_e2e_adj, pv_flux_e2e_tl
from meshops.operators.reconstruct import (reconstruct_e2c, reconstruct_e2c_adj, reconstruct_zonal_meridional_e2c,
                                 reconstruct_zonal_meridional_e2c_adj)
from meshops.operators.laplacian import (del4_c2c, del4_c2c_adj, del4_e2e, del4_e2e_adj, laplacian_c2c,
                               laplacian_c2c_adj, vector_laplacian_e2e, vector_laplacian_e2e_adj)
from meshops.operators.vertical import (avg_i2l, avg_i2l_adj, avg_l2i, avg_l2i_adj, diff_i2l, diff_i2l_adj,
                                       diff_l2i, diff_l2i_adj, div_vflux_i2l, div_vflux_i2l_adj, exner,
                                       exner_adj, exner_tl, interp_level_l2p, interp_level_l2p_adj,
                                       interp_level_l2p_tl, specific_volume, specific_volume_adj,
                                       specific_volume_tl, sum_layers_from_bottom_l2i,
                                       sum_layers_from_bottom_l2i_adj, sum_layers_from_top_l2i,
                                       sum_layers_from_top_l2i_adj)
from meshops.parallel.halo import HaloExchange
from meshops.parallel.distributed import DistributedOperator, distributed_operators
from meshops.parallel.layers import HALO_LAYERS, layers_needed, n_valid, valid_depth
from meshops.parallel.scatter_gather import gather_field, scatter_field
from meshops.parallel.state import FieldSpec, StateExchange

__all__ = [
    "DeviceMesh", "device_mesh", "OPERATORS", "register", "adjoint_mode", "get_adjoint_mode", "set_adjoint_mode",
    "div_e2c", "div_e2c_adj", "flux_div_e2c", "flux_div_e2c_tl", "flux_div_e2c_adj",
    "grad_c2e", "grad_c2e_adj", "grad_v2e", "grad_v2e_adj", "curl_e2v", "curl_e2v_adj",
    "circulation_e2v", "circulation_e2v_adj", "interp_c2e", "interp_c2e_adj", "interp_v2e",
    "interp_v2e_adj", "interp_c2v", "interp_c2v_adj", "interp_v2c", "interp_v2c_adj",
    "tangential_e2e", "tangential_e2e_adj",
    "ke_e2c", "ke_e2c_tl", "ke_e2c_adj", "ke_e2v", "ke_e2v_tl", "ke_e2v_adj", "pv_flux_e2e", "pv_flux_e2e_tl", "pv_flux_e2e_adj",
    "reconstruct_e2c", "reconstruct_e2c_adj", "reconstruct_zonal_meridional_e2c",
    "reconstruct_zonal_meridional_e2c_adj",
    "laplacian_c2c", "laplacian_c2c_adj", "vector_laplacian_e2e", "vector_laplacian_e2e_adj",
    "del4_c2c", "del4_c2c_adj", "del4_e2e", "del4_e2e_adj",
    "sum_layers_from_top_l2i", "sum_layers_from_top_l2i_adj", "sum_layers_from_bottom_l2i",
    "sum_layers_from_bottom_l2i_adj", "avg_l2i", "avg_l2i_adj", "diff_l2i", "diff_l2i_adj",
    "avg_i2l", "avg_i2l_adj", "diff_i2l", "diff_i2l_adj", "div_vflux_i2l", "div_vflux_i2l_adj",
    "interp_level_l2p", "interp_level_l2p_tl", "interp_level_l2p_adj", "exner", "exner_tl",
    "exner_adj", "specific_volume", "specific_volume_tl", "specific_volume_adj",
    "HaloExchange", "DistributedOperator", "distributed_operators",
    "StateExchange", "FieldSpec", "scatter_field", "gather_field",
    "HALO_LAYERS", "layers_needed", "n_valid", "valid_depth",
]
