"""Model-agnostic adjoint tools (verification, checkpointing, snapshot memory, the gradient sweep)
and the applications' drivers written once for any model (sensitivity, 4D-Var, torch/JAX
functions; decision 0033); here the verification functions (dot-product and Taylor tests)."""
from adjoint.verification import (DotProductResult, TaylorResult, VerificationInputError, dot_product_test,
                                  tangent_taylor_test, taylor_test)

__all__ = ["dot_product_test", "taylor_test", "tangent_taylor_test", "DotProductResult", "TaylorResult",
           "VerificationInputError"]
