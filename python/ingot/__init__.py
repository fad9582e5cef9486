# Copyright ingot authors. Apache-2.0.
"""ingot: an open inference compiler and runtime, with TensorRT's Python API.

    import ingot as trt        # a TensorRT script ports by changing this line

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network()
    parser = trt.OnnxParser(network, logger)
    parser.parse_from_file("model.onnx")
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16)
    engine_bytes = builder.build_serialized_network(network, config)
    engine = trt.Runtime(logger).deserialize_cuda_engine(engine_bytes)
    context = engine.create_execution_context()

or, for the common case, ``run = ingot.compile("model.onnx", fp16=True)``.
"""
from . import _ingot
from ._api import (Builder, BuilderFlag, Dims, Error, ErrorCode, ICudaEngine, IExecutionContext,  # noqa: F401
                   IBuilderConfig, IHostMemory, ILogger, INetworkDefinition, IOptimizationProfile, ITensor,
                   ITimingCache, DataType, Logger, MemoryPoolType, NetworkDefinitionCreationFlag, OnnxParser,
                   ParserError, ProfilingVerbosity, Runtime, TensorIOMode, default_backend, nptype)
from .calibrator import (CalibrationAlgoType, IInt8Calibrator, IInt8EntropyCalibrator,  # noqa: F401
                         IInt8EntropyCalibrator2, IInt8LegacyCalibrator, IInt8MinMaxCalibrator)
from .compile import CompiledModel, compile  # noqa: F401,A004
from .llm import LLM, CompletionOutput, RequestOutput, SamplingParams  # noqa: F401

__version__ = _ingot.version()

# TensorRT's type aliases (trt.float32, trt.float16, ...).
float32, float16, bfloat16 = DataType.FLOAT, DataType.HALF, DataType.BF16
int8, int32, int64, uint8 = DataType.INT8, DataType.INT32, DataType.INT64, DataType.UINT8
bool = DataType.BOOL  # noqa: A001
fp8 = DataType.FP8
