"""The adapters are optional: meshops imports without PyTorch and JAX, and the adapters say what to
install."""
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_meshops_imports_without_the_framework(framework):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["{framework}"] = None          # the framework is not installed
        import meshops, meshops.autodiff
        assert "{framework}" in sys.modules and sys.modules["{framework}"] is None
        try:
            import meshops.{framework}
        except ModuleNotFoundError as exc:
            assert exc.name == "{framework}" and "pip install 'meshops[{framework}]'" in str(exc), exc
            print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
