# Copyright ingot authors. Apache-2.0.
"""INT8 / FP8 calibrators shaped like TensorRT's: subclass one, implement get_batch_size,
get_batch(names), read_calibration_cache and write_calibration_cache, and set it as the builder
config's int8_calibrator with BuilderFlag.INT8 (or FP8).

get_batch returns one entry per name: a numpy array (or anything with __array__, a torch
tensor included), or, as TensorRT scripts do, an int address of a batch already copied to
memory (device memory on CUDA machines, host memory otherwise), read with the network input's
shape and get_batch_size() as its open batch dim. None (or []) ends the data. The cache is
TensorRT's text form (a header line, then ``tensor: hex-float32-scale``); ingot writes it after
calibrating and, when read_calibration_cache returns it, builds without asking for batches.
"""
import enum

from . import _ingot


class CalibrationAlgoType(enum.IntEnum):
    LEGACY_CALIBRATION = 0
    ENTROPY_CALIBRATION = 1
    ENTROPY_CALIBRATION_2 = 2
    MINMAX_CALIBRATION = 3


class IInt8Calibrator:
    def get_batch_size(self):
        return 1

    def get_batch(self, names):
        raise NotImplementedError("calibrators implement get_batch(names)")

    def read_calibration_cache(self):
        return None

    def write_calibration_cache(self, cache):
        pass

    def get_algorithm(self):
        return CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8EntropyCalibrator2(IInt8Calibrator):
    def get_algorithm(self):
        return CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8EntropyCalibrator(IInt8Calibrator):
    """Calibrated with ingot's entropy algorithm (TensorRT's EntropyCalibration2)."""

    def get_algorithm(self):
        return CalibrationAlgoType.ENTROPY_CALIBRATION


class IInt8MinMaxCalibrator(IInt8Calibrator):
    def get_algorithm(self):
        return CalibrationAlgoType.MINMAX_CALIBRATION


class IInt8LegacyCalibrator(IInt8Calibrator):
    """The percentile calibrator: get_quantile() (0..1, default 0.9999) of |x| sets the range."""

    def get_quantile(self):
        return 0.9999

    def get_regression_cutoff(self):
        return 1.0

    def get_algorithm(self):
        return CalibrationAlgoType.LEGACY_CALIBRATION


_NUMPY_TO_INGOT = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9, "float16": 10,
                   "float64": 11}


class _Bridge:
    """What the C++ builder calls (python/src/ingot_module.cc, CalibratorBridge)."""

    def __init__(self, calibrator, network):
        self._cal = calibrator
        self._inputs = {t.name: t for t in network._inputs}
        self._batches = 0

    def next_batch(self, infos):
        names = [name for name, _, _ in infos]
        got = self._cal.get_batch(names)
        if got is None or len(got) == 0:
            return None
        if len(got) != len(names):
            raise ValueError(f"get_batch returned {len(got)} entries for {len(names)} inputs {names}")
        out = []
        for (name, dtype, shape), item in zip(infos, got):
            out.append(self._entry(name, dtype, shape, item))
        self._batches += 1
        return out

    def _entry(self, name, dtype, shape, item):
        import numpy as np
        if isinstance(item, int):  # an address, as TensorRT's get_batch returns
            dims = list(shape)
            batch = int(self._cal.get_batch_size())
            dims = [batch if d < 0 and i == 0 else d for i, d in enumerate(dims)]
            if any(d < 0 for d in dims):
                raise ValueError(f"input '{name}' has open dims {shape} besides the batch: return an array")
            itemsize = {1: 4, 2: 1, 3: 1, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 16: 2}.get(dtype, 0)
            nbytes = itemsize * int(np.prod(dims)) if dims else itemsize
            return (name, dtype, dims, _ingot.read_memory(item, nbytes))
        if hasattr(item, "detach") and hasattr(item, "cpu"):  # a torch tensor
            item = item.detach().cpu().numpy()
        arr = np.ascontiguousarray(np.asarray(item))
        code = _NUMPY_TO_INGOT.get(arr.dtype.name)
        if code is None:
            raise TypeError(f"input '{name}': numpy dtype {arr.dtype} has no ingot type")
        return (name, code, list(arr.shape), arr.tobytes())

    def num_batches(self):
        n = getattr(self._cal, "num_batches", None)
        return int(n()) if callable(n) else -1

    def algorithm(self):
        a = CalibrationAlgoType(self._cal.get_algorithm())
        if a == CalibrationAlgoType.MINMAX_CALIBRATION:
            return "minmax"
        if a == CalibrationAlgoType.LEGACY_CALIBRATION:
            return "percentile"
        return "entropy"

    def percentile(self):
        q = getattr(self._cal, "get_quantile", None)
        return float(q()) * 100.0 if callable(q) else 99.99

    def read_cache(self):
        c = self._cal.read_calibration_cache()
        if not c:
            return ""
        return bytes(c).decode() if not isinstance(c, str) else c

    def write_cache(self, text):
        self._cal.write_calibration_cache(text.encode())
