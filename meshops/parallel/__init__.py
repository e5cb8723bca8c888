"""Distributed runs: the communicator, halo exchange (and its adjoint), its transports, and
operators over ranks."""
from meshops.parallel.comm import world

__all__ = ["world"]
