"""Physical constants of the shallow-water test cases (Williamson et al. 1992, J. Comput. Phys. 102)."""

#: Earth's radius a (m).
EARTH_RADIUS = 6.37122e6
#: Earth's rotation rate Omega (1/s).
OMEGA = 7.292e-5
#: Gravitational acceleration g (m/s^2).
GRAVITY = 9.80616
#: Seconds per day.
DAY = 86400.0
