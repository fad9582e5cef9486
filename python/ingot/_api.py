# Copyright ingot authors. Apache-2.0.
"""TensorRT's Python API names and shapes over ingot's C++ API (the _ingot extension).

A TensorRT build-and-run script ports by changing its import line: Logger, Builder,
create_network, OnnxParser (parse / parse_from_file / num_errors / get_error), the builder config
(set_memory_pool_limit, set_flag, builder_optimization_level, timing cache, optimization
profiles, int8_calibrator), build_serialized_network, Runtime.deserialize_cuda_engine, the
engine's I/O tensor queries, and the execution context's set_input_shape / set_tensor_address /
execute_async_v3 / execute_v2. Failures are logged through the Logger at ERROR and answered as
TensorRT answers them (None or False); ingot.Error carries the message where a call has nothing
to return it in.

On a machine without a GPU, engines are built for ingot's CPU backend and tensor addresses are
host addresses (numpy arrays' ``ctypes.data``); with one, for the CUDA backend, as TensorRT.
"""
import enum
import os
import re
import sys
import tempfile

from . import _ingot

Error = _ingot.Error


# ---- data types -------------------------------------------------------------------------------

class DataType(enum.IntEnum):
    """Element types; the values are ingot's (ONNX TensorProto) numbers, the names TensorRT's."""
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    INT32 = 6
    INT64 = 7
    BOOL = 9
    HALF = 10
    DOUBLE = 11
    BF16 = 16
    FP8 = 17
    INT4 = 22

    @property
    def itemsize(self):
        return {1: 4, 2: 1, 3: 1, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 16: 2, 17: 1}.get(int(self), 0)


def nptype(dtype):
    """The numpy type of a DataType (as trt.nptype); TypeError where numpy has none (bf16, fp8)."""
    import numpy as np
    table = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8,
             DataType.INT32: np.int32, DataType.INT64: np.int64, DataType.BOOL: np.bool_,
             DataType.UINT8: np.uint8, DataType.DOUBLE: np.float64}
    try:
        return table[DataType(dtype)]
    except (KeyError, ValueError):
        raise TypeError(f"no numpy type for {dtype!r}") from None


def _data_type(value):
    try:
        return DataType(value)
    except ValueError:
        return value  # a type TensorRT has no name for: the raw ingot number


class TensorIOMode(enum.IntEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class MemoryPoolType(enum.IntEnum):
    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4
    TACTIC_SHARED_MEMORY = 5


class BuilderFlag(enum.IntEnum):
    FP16 = 0
    INT8 = 1
    DEBUG = 2
    GPU_FALLBACK = 3
    REFIT = 5
    DISABLE_TIMING_CACHE = 6
    TF32 = 7
    SPARSE_WEIGHTS = 8
    SAFETY_SCOPE = 9
    OBEY_PRECISION_CONSTRAINTS = 10
    PREFER_PRECISION_CONSTRAINTS = 11
    DIRECT_IO = 12
    REJECT_EMPTY_ALGORITHMS = 13
    VERSION_COMPATIBLE = 14
    EXCLUDE_LEAN_RUNTIME = 15
    FP8 = 16
    BF16 = 17
    STRIP_PLAN = 19


class NetworkDefinitionCreationFlag(enum.IntEnum):
    EXPLICIT_BATCH = 0  # the only mode ingot has (TensorRT 10 makes it the default too)
    STRONGLY_TYPED = 1


class ProfilingVerbosity(enum.IntEnum):
    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2


class Dims(tuple):
    """A shape (as trt.Dims): a tuple of ints, -1 where open."""

    def __new__(cls, dims=()):
        return super().__new__(cls, (int(d) for d in dims))


# ---- logging ----------------------------------------------------------------------------------

class ILogger:
    """Subclass and override log(severity, msg), as with trt.ILogger."""

    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def __init__(self):
        pass

    def log(self, severity, msg):
        raise NotImplementedError("ILogger subclasses implement log(severity, msg)")

    # ingot's severities (kError = 0 ... kVerbose = 3) are TensorRT's shifted by one.
    def _from_library(self, severity, msg):
        self.log(ILogger.Severity(int(severity) + 1), msg)

    def _error(self, msg):
        self.log(ILogger.Severity.ERROR, msg)


class Logger(ILogger):
    """Prints messages at or above min_severity to stderr (as trt.Logger)."""

    def __init__(self, min_severity=ILogger.Severity.WARNING):
        super().__init__()
        self.min_severity = ILogger.Severity(min_severity)

    def log(self, severity, msg):
        if ILogger.Severity(severity) <= self.min_severity:
            print(f"[ingot] [{ILogger.Severity(severity).name}] {msg}", file=sys.stderr)


def _callback(logger):
    return None if logger is None else logger._from_library


def _report(logger, exc):
    if logger is not None:
        logger._error(str(exc))


# ---- network and parser -----------------------------------------------------------------------

class ITensor:
    def __init__(self, info, is_input):
        self.name = info["name"]
        self.shape = Dims(info["shape"])
        self.dtype = _data_type(info["dtype"])
        self.is_network_input = is_input
        self.is_network_output = not is_input

    def __repr__(self):
        return f"ITensor({self.name!r}, {tuple(self.shape)}, {self.dtype!r})"


class INetworkDefinition:
    """The network an OnnxParser fills: ingot builds from the model itself, so this holds the
    parsed model and its inputs and outputs."""

    def __init__(self, flags=0):
        self.flags = flags
        self.name = ""
        self._model = None  # bytes
        self._path = ""
        self._inputs, self._outputs = [], []
        self.num_layers = 0

    @property
    def num_inputs(self):
        return len(self._inputs)

    @property
    def num_outputs(self):
        return len(self._outputs)

    def get_input(self, index):
        return self._inputs[index]

    def get_output(self, index):
        return self._outputs[index]

    def _set(self, model, path, inputs, outputs, nodes):
        self._model, self._path = model, path
        self._inputs = [ITensor(i, True) for i in inputs]
        self._outputs = [ITensor(o, False) for o in outputs]
        self.num_layers = nodes


class ErrorCode(enum.IntEnum):
    SUCCESS = 0
    INTERNAL_ERROR = 1
    MEM_ALLOC_FAILED = 2
    MODEL_DESERIALIZE_FAILED = 3
    INVALID_VALUE = 4
    INVALID_GRAPH = 5
    INVALID_NODE = 6
    UNSUPPORTED_GRAPH = 7
    UNSUPPORTED_NODE = 8
    UNSUPPORTED_NODE_ATTR = 9
    UNSUPPORTED_NODE_INPUT = 10
    UNSUPPORTED_NODE_DATATYPE = 11
    UNSUPPORTED_NODE_DYNAMIC = 12
    UNSUPPORTED_NODE_SHAPE = 13
    REFIT_FAILED = 14


class ParserError:
    """One parse error (as TensorRT's IParserError): what, and the node and op at fault when the
    message names them."""

    def __init__(self, message, path=""):
        self._desc = message
        self._file = path
        # ingot names them as "op <Op> '<node>' (domain '<d>', opset N)" or "node '<node>'".
        m = re.search(r"\bop ([A-Za-z0-9_.:]+) '([^']*)'", message)
        self._op, self._node_name = (m.group(1), m.group(2)) if m else ("", "")
        if not m:
            m = re.search(r"node '([^']*)'", message)
            self._node_name = m.group(1) if m else ""
        idx = re.search(r"node #?(\d+)", message)
        self._node = int(idx.group(1)) if idx else -1
        low = message.lower()
        if low.startswith("unsupported"):
            self._code = ErrorCode.UNSUPPORTED_NODE if self._node_name or self._op else ErrorCode.UNSUPPORTED_GRAPH
        elif "not found" in low or "cannot open" in low:
            self._code = ErrorCode.INVALID_VALUE
        elif low.startswith("invalid model") or "protobuf" in low or "truncated" in low:
            self._code = ErrorCode.MODEL_DESERIALIZE_FAILED if "pars" in low or "truncated" in low \
                else ErrorCode.INVALID_GRAPH
        else:
            self._code = ErrorCode.INVALID_NODE if self._node_name else ErrorCode.INVALID_GRAPH

    def code(self):
        return self._code

    def desc(self):
        return self._desc

    def file(self):
        return self._file

    def func(self):
        return "parse"

    def line(self):
        return -1

    def node(self):
        return self._node

    def node_name(self):
        return self._node_name

    def node_operator(self):
        return self._op

    def __str__(self):
        where = f" (node '{self._node_name}', op '{self._op}')" if self._node_name or self._op else ""
        return f"{self._code.name}: {self._desc}{where}"


class OnnxParser:
    def __init__(self, network, logger):
        self.network = network
        self.logger = logger
        self._errors = []

    def parse(self, model, path=None):
        """Imports serialized ModelProto bytes (validating every node, inferring shapes); False,
        with the errors in get_error, when the model cannot be built from."""
        return self._parse(bytes(model), "")

    def parse_from_file(self, model):
        """As parse, from a file (external data resolved next to it)."""
        return self._parse(b"", os.fspath(model))

    def _parse(self, data, path):
        try:
            inputs, outputs, _, nodes = _ingot.import_model(data, path)
        except Error as e:
            self._errors.append(ParserError(str(e), path))
            _report(self.logger, e)
            return False
        self.network._set(data, path, inputs, outputs, nodes)
        return True

    @property
    def num_errors(self):
        return len(self._errors)

    def get_error(self, index):
        return self._errors[index]

    def clear_errors(self):
        self._errors = []

    def supports_operator(self, op_type):
        return True  # unsupported ops are named by parse()


# ---- builder ----------------------------------------------------------------------------------

class IOptimizationProfile:
    def __init__(self):
        self._shapes = {}

    def set_shape(self, input, min, opt, max):  # noqa: A002 - TensorRT's argument names
        self._shapes[input] = (Dims(min), Dims(opt), Dims(max))

    def get_shape(self, input):  # noqa: A002
        s = self._shapes.get(input)
        return [] if s is None else list(s)

    def __bool__(self):
        return bool(self._shapes)


class ITimingCache:
    """A timing cache (CUDA builds): kept in a file the builder reads and updates."""

    def __init__(self, serialized=b""):
        fd, self._path = tempfile.mkstemp(prefix="ingot-timing-", suffix=".cache")
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(serialized or b""))

    def serialize(self):
        with open(self._path, "rb") as f:
            return IHostMemory(f.read())

    def reset(self):
        open(self._path, "wb").close()
        return True

    def __del__(self):
        try:
            os.unlink(self._path)
        except OSError:
            pass


class IHostMemory(bytes):
    """Serialized data (an engine, a timing cache): bytes, with TensorRT's nbytes."""

    @property
    def nbytes(self):
        return len(self)


def default_backend():
    """'cuda' where this build has CUDA and a GPU is present, else 'cpu'."""
    return "cuda" if _ingot.built_with_cuda() and _ingot.cuda_device_count() > 0 else "cpu"


class IBuilderConfig:
    def __init__(self):
        self._flags = {BuilderFlag.TF32}  # TensorRT's default
        self._pools = {MemoryPoolType.WORKSPACE: 1 << 30}
        self.builder_optimization_level = 3
        self.profiles = []
        self.int8_calibrator = None
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self._timing_cache = None
        self.avg_timing_iterations = 1
        # ingot's own: the backend (default: CUDA when there is a GPU), engine I/O in fp16/bf16,
        # per-layer precisions by node name, and whether host-fallback steps are allowed.
        self.backend = default_backend()
        self.reduced_io = False
        self.layer_precisions = {}
        self.allow_host_fallback = True

    def set_flag(self, flag):
        self._flags.add(BuilderFlag(flag))

    def clear_flag(self, flag):
        self._flags.discard(BuilderFlag(flag))

    def get_flag(self, flag):
        return BuilderFlag(flag) in self._flags

    @property
    def flags(self):
        return sum(1 << int(f) for f in self._flags)

    @flags.setter
    def flags(self, mask):
        self._flags = {f for f in BuilderFlag if mask & (1 << int(f))}

    def set_memory_pool_limit(self, pool, pool_size):
        self._pools[MemoryPoolType(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool):
        return self._pools.get(MemoryPoolType(pool), 0)

    def add_optimization_profile(self, profile):
        self.profiles.append(profile)
        return len(self.profiles) - 1

    @property
    def num_optimization_profiles(self):
        return len(self.profiles)

    def create_timing_cache(self, serialized_timing_cache=b""):
        return ITimingCache(serialized_timing_cache)

    def set_timing_cache(self, cache, ignore_mismatch=False):
        self._timing_cache = cache
        return True

    def get_timing_cache(self):
        return self._timing_cache

    def _to_ingot(self, network):
        c = _ingot.BuilderConfig()
        c.backend = self.backend
        c.fp16 = BuilderFlag.FP16 in self._flags
        c.bf16 = BuilderFlag.BF16 in self._flags
        c.tf32 = BuilderFlag.TF32 in self._flags
        c.int8 = BuilderFlag.INT8 in self._flags
        c.fp8 = BuilderFlag.FP8 in self._flags
        c.strict_types = BuilderFlag.OBEY_PRECISION_CONSTRAINTS in self._flags
        c.workspace_bytes = self.get_memory_pool_limit(MemoryPoolType.WORKSPACE)
        c.optimization_level = int(self.builder_optimization_level)
        c.reduced_io = self.reduced_io
        c.layer_precisions = dict(self.layer_precisions)
        c.allow_host_fallback = self.allow_host_fallback
        if self._timing_cache is not None and BuilderFlag.DISABLE_TIMING_CACHE not in self._flags:
            c.timing_cache_file = self._timing_cache._path
        for p in self.profiles:
            c.add_profile([(name, list(mn), list(opt), list(mx)) for name, (mn, opt, mx) in p._shapes.items()])
        if (c.int8 or c.fp8) and self.int8_calibrator is not None:
            from .calibrator import _Bridge
            c.calibrator = _Bridge(self.int8_calibrator, network)
        return c


class Builder:
    def __init__(self, logger):
        self.logger = logger
        self._builder = _ingot.Builder(_callback(logger))
        self.max_threads = os.cpu_count() or 1

    def create_network(self, flags=0):
        return INetworkDefinition(flags)

    def create_builder_config(self):
        return IBuilderConfig()

    def create_optimization_profile(self):
        return IOptimizationProfile()

    @property
    def platform_has_fast_fp16(self):
        return default_backend() == "cuda"

    @property
    def platform_has_fast_int8(self):
        return default_backend() == "cuda"

    @property
    def platform_has_tf32(self):
        return default_backend() == "cuda"

    num_DLA_cores = 0

    def build_serialized_network(self, network, config):
        """The serialized engine (IHostMemory), or None with the reason logged at ERROR."""
        engine, _ = self._build(network, config)
        return engine

    def _build(self, network, config):
        if network._model is None:
            _report(self.logger, Error("invalid argument: the network is empty (parse a model into it first)"))
            return None, None
        try:
            data, summary = self._builder.build(config._to_ingot(network), network._model, network._path)
        except Error as e:
            _report(self.logger, e)
            return None, None
        return IHostMemory(data), summary

    def is_network_supported(self, network, config):
        return self.build_serialized_network(network, config) is not None


# ---- runtime ----------------------------------------------------------------------------------

class Runtime:
    def __init__(self, logger):
        self.logger = logger

    def deserialize_cuda_engine(self, serialized_engine):
        """An ICudaEngine, or None with the reason (a foreign or corrupt engine) logged at ERROR."""
        data = bytes(serialized_engine)
        try:
            engine = _ingot.deserialize(data, _callback(self.logger))
        except Error as e:
            _report(self.logger, e)
            return None
        return ICudaEngine(engine, data, self.logger)


class ICudaEngine:
    def __init__(self, engine, data, logger):
        self._engine = engine
        self._data = data
        self._logger = logger
        self._io = engine.io_tensors
        self._by_name = {t["name"]: t for t in self._io}

    @property
    def backend(self):
        return self._engine.backend

    @property
    def num_io_tensors(self):
        return len(self._io)

    @property
    def num_layers(self):
        return len(self._engine.layers)

    @property
    def num_optimization_profiles(self):
        return self._engine.num_profiles

    @property
    def device_memory_size(self):
        return self._engine.memory["arena_bytes"]

    @property
    def name(self):
        return ""

    def get_tensor_name(self, index):
        return self._io[index]["name"]

    def _io_desc(self, name):
        if name not in self._by_name:
            raise Error(f"not found: no I/O tensor named '{name}' (the engine has "
                        f"{', '.join(self._by_name)})")
        return self._by_name[name]

    def get_tensor_shape(self, name):
        return Dims(self._io_desc(name)["shape"])

    def get_tensor_dtype(self, name):
        return _data_type(self._io_desc(name)["dtype"])

    def get_tensor_mode(self, name):
        if name not in self._by_name:
            return TensorIOMode.NONE
        return TensorIOMode.INPUT if self._by_name[name]["is_input"] else TensorIOMode.OUTPUT

    def get_tensor_profile_shape(self, name, profile_index):
        mn, opt, mx = self._engine.profile_dimensions(profile_index, name)
        return [Dims(mn), Dims(opt), Dims(mx)]

    def create_execution_context(self):
        try:
            return IExecutionContext(self, self._engine.create_execution_context())
        except Error as e:
            _report(self._logger, e)
            return None

    def serialize(self):
        return IHostMemory(self._data)

    @property
    def layers(self):
        """ingot's own: the engine's steps (name, op, tactic, precision, fused origins, ...)."""
        return self._engine.layers


class IExecutionContext:
    def __init__(self, engine, ctx):
        self.engine = engine
        self._ctx = ctx
        self.name = ""
        self.debug_sync = False

    def _try(self, fn, *args):
        try:
            fn(*args)
            return True
        except Error as e:
            _report(self.engine._logger, e)
            return False

    def set_input_shape(self, name, shape):
        return self._try(self._ctx.set_input_shape, name, [int(d) for d in shape])

    def get_tensor_shape(self, name):
        try:
            self._ctx.infer_shapes()
        except Error:
            pass  # inputs not all set yet: their dims (or the model's) are what there is
        try:
            return Dims(self._ctx.tensor_shape(name))
        except Error:
            return self.engine.get_tensor_shape(name)

    def infer_shapes(self):
        """Names of tensors whose shapes could not be inferred: [] when all could."""
        try:
            self._ctx.infer_shapes()
            return []
        except Error as e:
            _report(self.engine._logger, e)
            return [t["name"] for t in self.engine._io if not t["is_input"]]

    @property
    def all_binding_shapes_specified(self):
        try:
            self._ctx.infer_shapes()
            return True
        except Error:
            return False

    all_shape_inputs_specified = True

    def set_tensor_address(self, name, memory):
        return self._try(self._ctx.set_tensor_address, name, int(memory))

    def get_tensor_address(self, name):
        return self._ctx.tensor_address(name)

    def set_optimization_profile_async(self, profile_index, stream_handle):
        return self._try(self._ctx.set_optimization_profile, int(profile_index))

    @property
    def active_optimization_profile(self):
        return self._ctx.optimization_profile

    def execute_async_v3(self, stream_handle):
        """Enqueues on the CUDA stream (an int handle; CPU engines run synchronously)."""
        return self._try(self._ctx.enqueue, int(stream_handle))

    def execute_v2(self, bindings):
        """Synchronous execution with one address per I/O tensor, in get_tensor_name order."""
        if len(bindings) != self.engine.num_io_tensors:
            _report(self.engine._logger, Error(f"invalid argument: execute_v2 got {len(bindings)} bindings for "
                                               f"{self.engine.num_io_tensors} I/O tensors"))
            return False
        for i, ptr in enumerate(bindings):
            if not self.set_tensor_address(self.engine.get_tensor_name(i), ptr):
                return False
        if not self._try(self._ctx.enqueue, 0):
            return False
        return self.engine.backend != "cuda" or self._try(_ingot.stream_synchronize, 0)

    # ingot's own
    def set_cuda_graph_mode(self, enabled):
        """CUDA engines: capture the enqueue into a CUDA graph and replay it (see engine.h)."""
        return self._try(self._ctx.set_cuda_graph_mode, bool(enabled))

    @property
    def cuda_graph_status(self):
        return self._ctx.cuda_graph_status

    @property
    def cuda_graphs_held(self):
        """How many captured graphs the context keeps (one per set of shapes and buffers, up to 16)."""
        return self._ctx.cuda_graphs_held
