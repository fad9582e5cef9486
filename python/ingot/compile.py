# Copyright ingot authors. Apache-2.0.
"""ingot.compile: an ONNX file to a callable in one line.

    run = ingot.compile("model.onnx", fp16=True, shapes={"input": (1, 3, 224, 224)})
    (logits,) = run(x)

CUDA engines read CUDA tensors in place (torch tensors, or anything with __cuda_array_interface__
or __dlpack__; no copy, the engine's input dtype, else TypeError) and write new torch tensors, on
the caller's current stream (the legacy default one too), replaying a CUDA graph once a set of
shapes and buffers repeats (the context keeps up to 16: a loop that drops each result before the
next call alternates between two output buffers and replays). CPU engines take and return numpy
arrays. shapes gives an input's fixed dims, or (min, opt, max) for a profile.
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
        self._dtypes = None  # DataType -> torch dtype, made on the first CUDA call
        self._shapes = None  # the input shapes the context was last set to
        self._out_shapes = None
        if self.cuda and cuda_graph:
            self.context.set_cuda_graph_mode(True)

    def _check(self, ok, what):
        if not ok:
            raise _api.Error(f"{what} failed (see the log)")

    def __call__(self, *args, **kwargs):
        return self._call(None, args, kwargs)

    def run_into(self, outputs, *args, **kwargs):
        """As calling the model, but writes into `outputs` (one CUDA tensor per engine output, in
        order, of the output's shape and dtype) and returns them: with the same buffers every
        call, the context replays one CUDA graph and rebuilds nothing (CUDA engines only)."""
        if not self.cuda:
            raise TypeError("run_into takes CUDA tensors; this is a CPU engine (call the model instead)")
        if len(outputs) != len(self.outputs):
            raise TypeError(f"{len(outputs)} output tensors given, the engine has {len(self.outputs)}: {self.outputs}")
        return self._call(list(outputs), args, kwargs)

    def _call(self, into, args, kwargs):
        if len(args) > len(self.inputs):
            raise TypeError(f"{len(args)} inputs given, the model takes {len(self.inputs)}: {self.inputs}")
        feeds = dict(zip(self.inputs, args))
        feeds.update(kwargs)
        missing = [n for n in self.inputs if n not in feeds]
        if missing:
            raise TypeError(f"missing inputs {missing}")
        return self._run_cuda(feeds, into) if self.cuda else self._run_cpu(feeds)

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

    def _torch_dtypes(self):
        import torch
        return {_api.DataType.FLOAT: torch.float32, _api.DataType.HALF: torch.float16,
                _api.DataType.BF16: torch.bfloat16, _api.DataType.INT64: torch.int64,
                _api.DataType.INT32: torch.int32, _api.DataType.INT8: torch.int8,
                _api.DataType.BOOL: torch.bool, _api.DataType.UINT8: torch.uint8}

    def _as_cuda_tensor(self, name, t, want=None, output=False):
        """A torch view of a CUDA tensor (torch.Tensor, __cuda_array_interface__ or DLPack), no copy."""
        import torch
        if not isinstance(t, torch.Tensor):
            if hasattr(t, "__cuda_array_interface__"):
                t = torch.as_tensor(t, device="cuda")
            elif hasattr(t, "__dlpack__"):
                t = torch.from_dlpack(t)
            else:
                raise TypeError(f"input '{name}': a CUDA engine takes torch tensors or objects with "
                                f"__cuda_array_interface__ or __dlpack__, not {type(t).__name__}")
        if not t.is_cuda:
            raise TypeError(f"'{name}' is on {t.device}; this CUDA engine reads and writes GPU memory "
                            f"(move it with .cuda() first)")
        if want is None:
            want = self._dtypes.get(self.engine.get_tensor_dtype(name))
        if want is not None and t.dtype != want:
            raise TypeError(f"'{name}' is {t.dtype}; the engine's tensor is {want}")
        if output and not t.is_contiguous():
            raise TypeError(f"output '{name}' is not contiguous; the engine writes dense row-major tensors")
        return t.contiguous()

    def _run_cuda(self, feeds, into=None):
        import torch
        if self._dtypes is None:
            self._dtypes = self._torch_dtypes()
        ts = [self._as_cuda_tensor(name, feeds[name]) for name in self.inputs]
        shapes = tuple(tuple(t.shape) for t in ts)
        ctx = self.context._ctx  # the extension's context: one call per binding, errors raise
        try:
            if shapes != self._shapes:
                self._shapes = None
                for name, shape in zip(self.inputs, shapes):
                    ctx.set_input_shape(name, list(shape))
                ctx.infer_shapes()
                self._out_shapes = [tuple(ctx.tensor_shape(n)) for n in self.outputs]
                self._shapes = shapes
            for name, t in zip(self.inputs, ts):
                ctx.set_tensor_address(name, t.data_ptr())
            device = ts[0].device if ts else torch.device("cuda")
            outs = []
            for k, (name, shape) in enumerate(zip(self.outputs, self._out_shapes)):
                dtype = self._dtypes[self.engine.get_tensor_dtype(name)]
                if into is None:
                    o = torch.empty(shape, dtype=dtype, device=device)
                else:
                    o = self._as_cuda_tensor(name, into[k], dtype, output=True)
                    if tuple(o.shape) != tuple(shape):
                        raise TypeError(f"output '{name}' is {tuple(o.shape)}; this call writes {tuple(shape)}")
                ctx.set_tensor_address(name, o.data_ptr())
                outs.append(o)
            # The caller's current stream (the legacy default one too: the context captures its
            # graph on a stream of its own and launches it there).
            ctx.enqueue(torch.cuda.current_stream(device).cuda_stream)
        except _api.Error:
            self._shapes = None  # set everything again next call
            raise
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
