# Copyright ingot authors. Apache-2.0.
"""ingot.compile: an ONNX file to a callable in one line.

    run = ingot.compile("model.onnx", fp16=True, shapes={"input": (1, 3, 224, 224)})
    (logits,) = run(x)

CUDA engines take and fill torch tensors (or anything with __cuda_array_interface__) in place on
the caller's current stream, with a CUDA graph replayed once the shapes settle; CPU engines take
and return numpy arrays. shapes gives an input's fixed dims, or (min, opt, max) for a profile.
"""
import os

from . import _api


class CompiledModel:
    def __init__(self, engine, cuda_graph):
        self.engine = engine
        self.context = engine.create_execution_context()
        if self.context is None:
            raise _api.Error("could not create an execution context (see the log)")
        self.inputs = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)
                       if engine.get_tensor_mode(engine.get_tensor_name(i)) == _api.TensorIOMode.INPUT]
        self.outputs = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)
                        if engine.get_tensor_mode(engine.get_tensor_name(i)) == _api.TensorIOMode.OUTPUT]
        self.cuda = engine.backend == "cuda"
        if self.cuda and cuda_graph:
            self.context.set_cuda_graph_mode(True)

    def _check(self, ok, what):
        if not ok:
            raise _api.Error(f"{what} failed (see the log)")

    def __call__(self, *args, **kwargs):
        if len(args) > len(self.inputs):
            raise TypeError(f"{len(args)} inputs given, the model takes {len(self.inputs)}: {self.inputs}")
        feeds = dict(zip(self.inputs, args))
        feeds.update(kwargs)
        missing = [n for n in self.inputs if n not in feeds]
        if missing:
            raise TypeError(f"missing inputs {missing}")
        return self._run_cuda(feeds) if self.cuda else self._run_cpu(feeds)

    def _run_cpu(self, feeds):
        import numpy as np
        keep = []
        for name in self.inputs:
            want = _api.nptype(self.engine.get_tensor_dtype(name))
            a = np.ascontiguousarray(np.asarray(feeds[name]), dtype=want)
            keep.append(a)
            self._check(self.context.set_input_shape(name, a.shape), f"set_input_shape('{name}', {a.shape})")
            self._check(self.context.set_tensor_address(name, a.ctypes.data), f"set_tensor_address('{name}')")
        outs = []
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise _api.Error(f"output '{name}' has a data-dependent shape {shape}")
            o = np.empty(shape, dtype=_api.nptype(self.engine.get_tensor_dtype(name)))
            self._check(self.context.set_tensor_address(name, o.ctypes.data), f"set_tensor_address('{name}')")
            outs.append(o)
        self._check(self.context.execute_async_v3(0), "execute")
        return outs

    def _run_cuda(self, feeds):
        import torch
        stream = torch.cuda.current_stream()
        keep = []
        for name in self.inputs:
            t = feeds[name]
            if not isinstance(t, torch.Tensor) and hasattr(t, "__cuda_array_interface__"):
                t = torch.as_tensor(t, device="cuda")
            t = t.contiguous()
            keep.append(t)
            self._check(self.context.set_input_shape(name, tuple(t.shape)), f"set_input_shape('{name}')")
            self._check(self.context.set_tensor_address(name, t.data_ptr()), f"set_tensor_address('{name}')")
        outs = []
        dtypes = {_api.DataType.FLOAT: torch.float32, _api.DataType.HALF: torch.float16,
                  _api.DataType.BF16: torch.bfloat16, _api.DataType.INT64: torch.int64,
                  _api.DataType.INT32: torch.int32, _api.DataType.INT8: torch.int8,
                  _api.DataType.BOOL: torch.bool, _api.DataType.UINT8: torch.uint8}
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            o = torch.empty(shape, dtype=dtypes[self.engine.get_tensor_dtype(name)], device=keep[0].device)
            self._check(self.context.set_tensor_address(name, o.data_ptr()), f"set_tensor_address('{name}')")
            outs.append(o)
        self._check(self.context.execute_async_v3(stream.cuda_stream), "execute_async_v3")
        return outs


def compile(onnx_path, fp16=False, bf16=False, shapes=None, backend=None, cuda_graph=True,  # noqa: A001
            workspace=None, logger=None):
    """Builds an engine for `onnx_path` and returns a CompiledModel (callable)."""
    logger = logger or _api.Logger(_api.Logger.WARNING)
    builder = _api.Builder(logger)
    network = builder.create_network()
    parser = _api.OnnxParser(network, logger)
    if not parser.parse_from_file(os.fspath(onnx_path)):
        raise _api.Error("; ".join(parser.get_error(i).desc() for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    if backend:
        config.backend = backend
    if fp16:
        config.set_flag(_api.BuilderFlag.FP16)
    if bf16:
        config.set_flag(_api.BuilderFlag.BF16)
    if workspace:
        config.set_memory_pool_limit(_api.MemoryPoolType.WORKSPACE, workspace)
    if shapes:
        profile = builder.create_optimization_profile()
        for name, s in shapes.items():
            if len(s) == 3 and all(isinstance(x, (tuple, list)) for x in s):
                profile.set_shape(name, *s)
            else:
                profile.set_shape(name, s, s, s)
        config.add_optimization_profile(profile)
    errors = []

    class _Keep(_api.ILogger):
        def log(self, severity, msg):
            if severity <= _api.ILogger.ERROR:
                errors.append(msg)
            logger.log(severity, msg)

    keep = _Keep()
    serialized = _api.Builder(keep).build_serialized_network(network, config)
    if serialized is None:
        raise _api.Error("build failed: " + "; ".join(errors))
    engine = _api.Runtime(keep).deserialize_cuda_engine(serialized)
    if engine is None:
        raise _api.Error("could not load the engine just built: " + "; ".join(errors))
    return CompiledModel(engine, cuda_graph)
