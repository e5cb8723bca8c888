"""Adjoint tooling: verification (dot-product and Taylor tests) as library functions."""
from adjoint.verification import (DotProductResult, TaylorResult, VerificationInputError, dot_product_test,
                                  tangent_taylor_test, taylor_test)

__all__ = ["dot_product_test", "taylor_test", "tangent_taylor_test", "DotProductResult", "TaylorResult",
           "VerificationInputError"]
