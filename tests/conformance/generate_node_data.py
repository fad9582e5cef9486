#!/usr/bin/env python3
"""Writes ONNX's node test suite, as the installed onnx package defines it, to a folder.

`backend-test-tools generate-data` (onnx's own command) only writes the "real" and "simple"
model cases in current onnx releases; the node cases live in onnx.backend.test.case.node and
are written here in the same layout the onnx repository uses:
  <out>/node/<case>/model.onnx
  <out>/node/<case>/test_data_set_<k>/{input,output}_<j>.pb
Inputs/outputs that are sequences or optionals are written as SequenceProto / OptionalProto,
exactly as onnx does, so the runner can report them as unsupported instead of skipping them.
"""
import argparse
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import onnx.backend.test.case.node as node_cases


def write_value(path, value, value_info):
    t = value_info.type
    if t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, value_info.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, value_info.name)
    elif t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, value_info.name)
    elif isinstance(value, onnx.TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(np.asarray(value), value_info.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    out = os.path.join(args.output, "node")
    if os.path.exists(out):
        shutil.rmtree(out)
    cases = node_cases.collect_testcases(None)
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds, exist_ok=True)
            for j, v in enumerate(inputs):
                write_value(os.path.join(ds, f"input_{j}.pb"), v, case.model.graph.input[j])
            for j, v in enumerate(outputs):
                write_value(os.path.join(ds, f"output_{j}.pb"), v, case.model.graph.output[j])
    print(f"onnx {onnx.__version__}: wrote {len(cases)} node cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
