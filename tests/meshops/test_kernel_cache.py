"""CuPy caches compiled kernels by source and options, not by the headers a source includes: the
headers' digest among the options makes a changed header compile anew."""
from meshops.device.kernels import CUDA_DIR, headers_digest


def test_the_headers_digest_follows_every_header_on_the_include_path(tmp_path, rng):
    (tmp_path / "model.cu").write_text("#include \"model.cuh\"\n")
    header = tmp_path / "model.cuh"
    header.write_text(f"// {rng.standard_normal()}\n")
    first = headers_digest.__wrapped__(tmp_path)
    assert headers_digest.__wrapped__(tmp_path) == first
    header.write_text(header.read_text() + "#define MODEL_LANES 2\n")
    second = headers_digest.__wrapped__(tmp_path)
    assert second != first
    (tmp_path / "model.cu").write_text("#include \"model.cuh\"\n// a source is CuPy's own key\n")
    assert headers_digest.__wrapped__(tmp_path) == second
    assert headers_digest(CUDA_DIR) == headers_digest.__wrapped__(CUDA_DIR)
    assert len(first) == 16 and first != headers_digest(CUDA_DIR)
