# Copyright ingot authors. Apache-2.0.
"""CUDA engines with torch tensors (issue 21, item 3): ingot.compile reads CUDA tensors in place
(torch, __cuda_array_interface__, DLPack), works on the caller's stream, replays a CUDA graph on
the legacy default stream too, and refuses tensors it cannot read with a TypeError that says why.
The raw TensorRT-style context on torch memory is covered by test_trt_api.py on the GPU.

Skipped on machines without a CUDA device (CI); run on the GPU machine by bench/python_part.sh.
"""
import numpy as np
import pytest
from fmnist import MODEL, reference


@pytest.fixture(scope="module")
def torch(trt):
    if trt.default_backend() != "cuda":
        pytest.skip("no CUDA device (or a build without CUDA): these tests run on the GPU machine")
    import torch
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="module")
def run(trt, torch):
    return trt.compile(MODEL, fp16=True, shapes={"image": ((1, 1, 28, 28), (8, 1, 28, 28), (16, 1, 28, 28))})


def close(got, want):
    got = got.float().cpu().numpy() if hasattr(got, "cpu") else got
    cos = float(np.dot(got.ravel(), want.ravel()) / (np.linalg.norm(got) * np.linalg.norm(want)))
    return cos > 0.9995 and float(np.abs(got - want).max() / np.abs(want).max()) < 1e-2, cos


def test_torch_tensors_in_place(run, torch):
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((8, 1, 28, 28)).astype(np.float32)
    x = torch.from_numpy(x_np).cuda()
    (y,) = run(x)
    torch.cuda.synchronize()
    ok, cos = close(y, reference(x_np))
    assert ok, f"fp16 engine vs onnxruntime: cosine {cos}"
    assert y.is_cuda and y.dtype == torch.float32 and tuple(y.shape) == (8, 10)
    assert run.context.get_tensor_address("image") == x.data_ptr(), "the input was copied, not read in place"
    assert run.context.get_tensor_address("logits") == y.data_ptr(), "the output was not written in place"


def test_graph_replays_on_the_legacy_default_stream(run, torch):
    x_np = np.random.default_rng(2).standard_normal((4, 1, 28, 28)).astype(np.float32)
    x = torch.from_numpy(x_np).cuda()
    want = reference(x_np)
    assert torch.cuda.current_stream().cuda_stream == 0, "the test expects torch's legacy default stream"
    for call in range(4):
        (y,) = run(x)
        torch.cuda.synchronize()
        ok, cos = close(y, want)
        assert ok, f"call {call}: cosine {cos}"
        if call >= 2:  # plain run, capture, then replays (two output buffers alternate)
            assert run.context.cuda_graph_status == "", run.context.cuda_graph_status
    assert run.context.cuda_graphs_held >= 1, "no graph was kept for the alternating output buffers"


def test_run_into_fixed_buffers(run, torch):
    x_np = np.random.default_rng(6).standard_normal((8, 1, 28, 28)).astype(np.float32)
    x = torch.from_numpy(x_np).cuda()
    y = torch.empty((8, 10), device="cuda")
    want = reference(x_np)
    held = None
    for call in range(4):
        (got,) = run.run_into([y], x)
        torch.cuda.synchronize()
        assert got.data_ptr() == y.data_ptr()
        ok, cos = close(y, want)
        assert ok, f"call {call}: cosine {cos}"
        if call == 2:
            held = run.context.cuda_graphs_held
    assert run.context.cuda_graph_status == "" and run.context.cuda_graphs_held == held, "a new graph per call"
    with pytest.raises(TypeError, match="contiguous"):
        run.run_into([torch.empty((10, 8), device="cuda").t()], x)
    with pytest.raises(TypeError, match="float16|float32"):
        run.run_into([torch.empty((8, 10), device="cuda", dtype=torch.float16)], x)


def test_runs_on_the_callers_stream(run, torch):
    """The input is written on a side stream held back by a sleep; an engine running on any other
    stream would read the old data."""
    rng = np.random.default_rng(3)
    old_np, new_np = (rng.standard_normal((8, 1, 28, 28)).astype(np.float32) for _ in range(2))
    x = torch.from_numpy(old_np).cuda()
    new = torch.from_numpy(new_np).cuda()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)  # ~50 ms on the GPU before the copy
        x.copy_(new)
        (y,) = run(x)
    s.synchronize()
    ok, cos = close(y, reference(new_np))
    assert ok, f"the engine did not run after the copy on the caller's stream: cosine {cos}"


def test_cuda_array_interface_and_dlpack(run, torch):
    x_np = np.random.default_rng(4).standard_normal((2, 1, 28, 28)).astype(np.float32)
    t = torch.from_numpy(x_np).cuda()

    class CAI:
        __cuda_array_interface__ = t.__cuda_array_interface__

    class DL:
        def __dlpack__(self, **kw):
            return t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    want = reference(x_np)
    for obj in (CAI(), DL()):
        (y,) = run(obj)
        torch.cuda.synchronize()
        ok, cos = close(y, want)
        assert ok, f"{type(obj).__name__}: cosine {cos}"
        assert run.context.get_tensor_address("image") == t.data_ptr(), f"{type(obj).__name__} was copied"


def test_refuses_what_it_cannot_read(trt, run, torch):
    x = torch.ones((2, 1, 28, 28))
    with pytest.raises(TypeError, match=r"\.cuda\(\)"):
        run(x)
    with pytest.raises(TypeError, match="float16.*float32|float32.*float16"):
        run(x.cuda().half())
    with pytest.raises(TypeError, match="list"):
        run([[1.0]])
    with pytest.raises(trt.Error, match="17|profile"):
        run(torch.ones((17, 1, 28, 28), device="cuda"))
    (y,) = run(x.cuda())  # still usable after the errors
    torch.cuda.synchronize()
    assert tuple(y.shape) == (2, 10)
