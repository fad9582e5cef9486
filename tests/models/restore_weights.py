#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Fills the float initializers of a weight-stripped model (bench/export_structures.py keeps the
integer and small tensors) with random data of the recorded dtype and dims, so exported graph
structures can be imported, optimized and built on a machine without torch: floats ~ N(0, 0.02),
BERT-like. Integer initializers a stripped file lacks (older strips) become zeros.

  python3 tests/models/restore_weights.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main():
    src, dst = sys.argv[1], sys.argv[2]
    m = onnx.load(src)
    rng = np.random.default_rng(0)
    for t in m.graph.initializer:
        if t.HasField("raw_data") or len(t.float_data) or len(t.int64_data) or len(t.int32_data):
            continue
        dims = tuple(t.dims)
        np_type = helper.tensor_dtype_to_np_dtype(t.data_type)
        if np.issubdtype(np_type, np.floating):
            a = (rng.standard_normal(dims) * 0.02).astype(np_type)
        else:
            a = np.zeros(dims, dtype=np_type)
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(m, dst)


if __name__ == "__main__":
    main()
