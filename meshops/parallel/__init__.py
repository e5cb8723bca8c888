"""Distributed runs: the communicator, halo exchange of one field (`HaloExchange`) and of a whole
model state in one message per neighbour (`StateExchange`), both with their adjoints, their
transports, the halo layers each operator consumes (`meshops.parallel.layers`), global <-> local
fields (`scatter_field`, `gather_field`) and operators over ranks."""
from meshops.parallel.comm import world
from meshops.parallel.halo import HaloExchange
from meshops.parallel.layers import HALO_LAYERS, chain_depth, halo_layers, layers_needed, n_valid, valid_depth
from meshops.parallel.scatter_gather import gather_field, scatter_field
from meshops.parallel.state import FieldSpec, StateExchange

__all__ = ["world", "HaloExchange", "StateExchange", "FieldSpec", "scatter_field", "gather_field",
           "HALO_LAYERS", "halo_layers", "valid_depth", "chain_depth", "layers_needed", "n_valid"]
