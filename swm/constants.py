"""Physical constants of the shallow-water test cases (Williamson et al. 1992, J. Comput. Phys. 102)."""

# Earth's radius a (m): the package's one radius, MPAS's ``a`` = 6371229 m (Williamson et al. quote
# 6.37122e6 m), so that a generated mesh, an MPAS grid file and the model agree (decision 0014).
from grids.mesh import EARTH_RADIUS

__all__ = ["EARTH_RADIUS", "OMEGA", "GRAVITY", "DAY"]

#: Earth's rotation rate Omega (1/s).
OMEGA = 7.292e-5
#: Gravitational acceleration g (m/s^2).
GRAVITY = 9.80616
#: Seconds per day.
DAY = 86400.0
