#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The 4-bit checkpoint cases (tests/data/int4_tiny): a tiny Llama as Hugging Face folders, written
once by the quantizers' own code (the oracles) where torch, autoawq, auto-gptq (BUILD_CUDA_EXT=0) and
compressed-tensors install,
and kept in the repository. Each quantized folder has a twin with plain fp32 projections, the
values the quantizer's own unpacking gives, (q - zero) * scale in fp32 (exact: a 4-bit integer
times an fp16 scale):

  awq/, awq_dequant/          AutoAWQ "gemm": qweight, qzeros, scales packed by
                              awq.modules.linear.gemm.WQLinear_GEMM.from_linear; unpacked by
                              awq.utils.packing_utils (unpack_awq, reverse_awq_order). Scales and
                              zeros are AWQ's asymmetric formulas (pseudo_quantize_tensor):
                              scale = (max - min) / 15, zero = clamp(-round(min / scale), 0, 15).
  gptq/, gptq_dequant/        AutoGPTQ's "gptq" (v1) format: qweight, qzeros (zero - 1), scales, g_idx
                              packed by auto_gptq's QuantLinear.pack (qlinear_cuda_old), symmetric;
                              its values from that module's own dequantizing forward in fp32.
  gptq_act/, gptq_act_dequant/  the same with act-order (desc_act): g_idx of a random order of the
                              inputs, packed and unpacked by qlinear_cuda (whose forward reads g_idx).
  ct_sym/, ct_sym_dequant/    compressed-tensors "pack-quantized" (llm-compressor's W4A16, what vLLM
  ct_asym/, ct_asym_dequant/  loads): weight_packed, weight_scale, weight_shape (and
                              weight_zero_point when asymmetric) from PackedQuantizationCompressor
                              .compress with scales from calculate_qparams; unpacked by its
                              unpack_from_int32.

All carry the byte-level tokenizer of bench/llm/make_dummy_folder.py; groups of 32.

Usage (CPU is enough): python3 tests/llm/make_int4_cases.py -o tests/data/int4_tiny
"""
import argparse
import json
import os
import sys

import torch
from awq.modules.linear.gemm import WQLinear_GEMM
from awq.utils.packing_utils import reverse_awq_order, unpack_awq
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "llm"))
from make_dummy_folder import write_byte_tokenizer  # noqa: E402  (the byte-level tokenizer of the dummy folders)

GROUP = 32
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300,
          "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 299, "torch_dtype": "float16"}


def awq_scales_zeros(w):
    """AWQ's asymmetric per-group parameters of w [out, in]: scales and zeros [in / GROUP, out]."""
    out, k = w.shape
    g = w.reshape(out, k // GROUP, GROUP)
    mx, mn = g.amax(dim=2), g.amin(dim=2)
    scales = ((mx - mn).clamp(min=1e-5) / 15).half().float()
    zeros = (-torch.round(mn / scales)).clamp(0, 15)
    return scales.t().contiguous(), zeros.t().contiguous()


def ct_pack(w, symmetric):
    """compressed-tensors' pack-quantized tensors of w [out, in] and their unpacked values."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils.helpers import calculate_qparams
    args = QuantizationArgs(num_bits=4, type="int", symmetric=symmetric, strategy="group", group_size=GROUP)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    out, k = w.shape
    g = w.reshape(out, k // GROUP, GROUP)
    scale, zp = calculate_qparams(g.amin(dim=2), g.amax(dim=2), args)
    scale = scale.half()
    state = {"weight": w.half(), "weight_scale": scale, "weight_zero_point": zp.to(torch.int8)}
    packed = PackedQuantizationCompressor.compress(state, scheme)
    q = unpack_from_int32(packed["weight_packed"], 4, torch.Size([out, k]))
    z = zp if symmetric else unpack_from_int32(packed["weight_zero_point"], 4, torch.Size([out, k // GROUP]), packed_dim=0)
    deq = (q.float() - z.float().repeat_interleave(GROUP, dim=1)) * scale.float().repeat_interleave(GROUP, dim=1)
    tensors = {name: t.contiguous() for name, t in packed.items() if name.startswith("weight_")}
    return tensors, deq


def awq_pack(w):
    """AutoAWQ's gemm tensors of w [out, in] and their unpacked values."""
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    scales, zeros = awq_scales_zeros(w)
    q = WQLinear_GEMM.from_linear(lin, 4, GROUP, scales=scales, zeros=zeros)
    iw, iz = unpack_awq(q.qweight, q.qzeros, 4)
    iw, iz = reverse_awq_order(iw, iz, 4)
    iw, iz = iw & 15, iz & 15  # [in, out], [in / GROUP, out]
    deq = (iw.float() - iz.float().repeat_interleave(GROUP, dim=0)) * q.scales.float().repeat_interleave(GROUP, dim=0)
    tensors = {"qweight": q.qweight.contiguous(), "qzeros": q.qzeros.contiguous(), "scales": q.scales.contiguous()}
    return tensors, deq.t().contiguous()


def gptq_pack(w, act_order=False):
    """AutoGPTQ's (v1 "gptq" checkpoint format) tensors of w [out, in], symmetric (zero 8, stored as
    7: the format's zero - 1), and their values: the module's own dequantizing forward in fp32 on
    the identity. act_order: GPTQ's desc_act layout, a random order of the inputs cut into groups
    (g_idx[order[i]] = i // GROUP, as AutoGPTQ's quantizer writes it), packed and unpacked by
    qlinear_cuda, whose forward reads g_idx (qlinear_cuda_old's assumes k // GROUP)."""
    import importlib.util
    import sysconfig
    # The module file alone: the auto_gptq package's __init__ needs an older transformers.
    module = "qlinear_cuda" if act_order else "qlinear_cuda_old"
    path = os.path.join(sysconfig.get_paths()["purelib"], "auto_gptq", "nn_modules", "qlinear", module + ".py")
    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, k = w.shape
    lin = torch.nn.Linear(k, out, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w.half().float())
    lin = lin.half()
    g_idx = torch.arange(k) // GROUP
    if act_order:
        order = torch.randperm(k)
        g_idx = torch.empty(k, dtype=torch.long)
        g_idx[order] = torch.arange(k) // GROUP
    # Each group's scale from its own inputs' weights.
    amax = torch.zeros(out, k // GROUP).scatter_reduce(1, g_idx.expand(out, k), w.abs(), "amax")
    scales = (2 * amax / 15).clamp(min=1e-5).half().float()
    zeros = torch.full_like(scales, 8)
    q = mod.QuantLinear(4, GROUP, k, out, False)
    q.pack(lin.cpu(), scales, zeros, g_idx)
    tensors = {"qweight": q.qweight.contiguous(), "qzeros": q.qzeros.contiguous(), "scales": q.scales.contiguous(),
               "g_idx": q.g_idx.to(torch.int32).contiguous()}
    q.scales = q.scales.float()
    with torch.no_grad():
        deq = q(torch.eye(k, dtype=torch.float32)).t().contiguous()  # row i of the identity picks input i
    return tensors, deq


def ct_config(symmetric):
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                          "weights": {"num_bits": 4, "type": "int", "symmetric": symmetric,
                                                      "strategy": "group", "group_size": GROUP, "dynamic": False,
                                                      "actorder": None}}}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--only", nargs="*", help="write these cases only (default: all)")
    a = ap.parse_args()
    c = CONFIG
    d, ff, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    nkv = c["num_key_value_heads"] * hd
    shapes = {"self_attn.q_proj": (d, d), "self_attn.k_proj": (nkv, d), "self_attn.v_proj": (nkv, d),
              "self_attn.o_proj": (d, d), "mlp.gate_proj": (ff, d), "mlp.up_proj": (ff, d), "mlp.down_proj": (d, ff)}
    cases = {"awq": (awq_pack, {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True,
                                "version": "gemm"}),
             "gptq": (gptq_pack, {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False,
                                  "sym": True, "checkpoint_format": "gptq"}),
             "gptq_act": (lambda w: gptq_pack(w, act_order=True),
                          {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": True, "sym": True,
                           "checkpoint_format": "gptq"}),
             "ct_sym": (lambda w: ct_pack(w, True), ct_config(True)),
             "ct_asym": (lambda w: ct_pack(w, False), ct_config(False))}
    for name, (pack, qconfig) in cases.items():
        if a.only and name not in a.only:
            continue
        torch.manual_seed(20261206)
        quant, plain = {}, {}

        def put(key, t):
            quant[key] = t.half()
            plain[key] = t.half().float()

        put("model.embed_tokens.weight", torch.randn(c["vocab_size"], d) * 0.5)
        put("model.norm.weight", 1 + 0.1 * torch.randn(d))
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            put(p + "input_layernorm.weight", 1 + 0.1 * torch.randn(d))
            put(p + "post_attention_layernorm.weight", 1 + 0.1 * torch.randn(d))
            for proj, (n, k) in shapes.items():
                tensors, deq = pack(torch.randn(n, k) * 0.1)
                for suffix, t in tensors.items():
                    quant[p + proj + "." + suffix] = t
                plain[p + proj + ".weight"] = deq
        for sub, tensors, extra in ((name, quant, {"quantization_config": qconfig}), (name + "_dequant", plain, {})):
            os.makedirs(os.path.join(a.out, sub), exist_ok=True)
            save_file(tensors, os.path.join(a.out, sub, "model.safetensors"), metadata={"format": "pt"})
            with open(os.path.join(a.out, sub, "config.json"), "w") as f:
                json.dump({**c, **extra}, f, indent=1)
            write_byte_tokenizer(os.path.join(a.out, sub), c["vocab_size"])
        print(f"wrote {a.out}/{name} and {a.out}/{name}_dequant")


if __name__ == "__main__":
    main()
