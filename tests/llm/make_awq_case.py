#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The AWQ test case (tests/data/awq_tiny): a tiny Llama as Hugging Face folders, written once by
AutoAWQ's own code (the oracle) where torch and autoawq install, and kept in the repository:

  awq/      config.json with AutoAWQ's quantization_config (4 bits, groups of 32, zero points, GEMM),
            model.safetensors: each projection packed by awq.modules.linear.gemm.WQLinear_GEMM
            .from_linear (qweight, qzeros, scales), the rest fp16.
  dequant/  the same model with plain fp32 projections: AutoAWQ's unpack_awq + reverse_awq_order,
            then (q - zero) * scale in fp32 (exact: a 4-bit integer times an fp16 scale).

Both carry the byte-level tokenizer of bench/llm/make_dummy_folder.py. The scales and zeros are AWQ's asymmetric round-to-nearest per group (awq.quantize.quantizer
pseudo_quantize_tensor's formulas): scale = (max - min) / 15, zero = clamp(-round(min / scale), 0, 15).

Usage (CPU is enough): python3 tests/llm/make_awq_case.py -o tests/data/awq_tiny
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
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300,
          "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 299, "torch_dtype": "float16"}


def awq_scales_zeros(w):
    """AWQ's asymmetric per-group parameters of w [out, in]: scales and zeros [in / GROUP, out]."""
    out, k = w.shape
    g = w.reshape(out, k // GROUP, GROUP)
    mx, mn = g.amax(dim=2), g.amin(dim=2)
    scales = ((mx - mn).clamp(min=1e-5) / 15).half().float()
    zeros = (-torch.round(mn / scales)).clamp(0, 15)
    return scales.t().contiguous(), zeros.t().contiguous()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(20261206)
    c = CONFIG
    d, ff, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    nkv = c["num_key_value_heads"] * hd
    awq, plain = {}, {}

    def put(name, t):
        awq[name] = t.half()
        plain[name] = t.half().float()

    put("model.embed_tokens.weight", torch.randn(c["vocab_size"], d) * 0.5)
    put("lm_head.weight", torch.randn(c["vocab_size"], d) * 0.1)
    put("model.norm.weight", 1 + 0.1 * torch.randn(d))
    shapes = {"self_attn.q_proj": (d, d), "self_attn.k_proj": (nkv, d), "self_attn.v_proj": (nkv, d),
              "self_attn.o_proj": (d, d), "mlp.gate_proj": (ff, d), "mlp.up_proj": (ff, d), "mlp.down_proj": (d, ff)}
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        put(p + "input_layernorm.weight", 1 + 0.1 * torch.randn(d))
        put(p + "post_attention_layernorm.weight", 1 + 0.1 * torch.randn(d))
        for proj, (n, k) in shapes.items():
            lin = torch.nn.Linear(k, n, bias=False)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(n, k) * 0.1)
            scales, zeros = awq_scales_zeros(lin.weight.data)
            q = WQLinear_GEMM.from_linear(lin, 4, GROUP, scales=scales, zeros=zeros)
            awq[p + proj + ".qweight"] = q.qweight.contiguous()
            awq[p + proj + ".qzeros"] = q.qzeros.contiguous()
            awq[p + proj + ".scales"] = q.scales.contiguous()
            iw, iz = unpack_awq(q.qweight, q.qzeros, 4)
            iw, iz = reverse_awq_order(iw, iz, 4)
            iw, iz = iw & 15, iz & 15  # [in, out], [in / GROUP, out]
            deq = (iw.float() - iz.float().repeat_interleave(GROUP, dim=0)) * q.scales.float().repeat_interleave(GROUP, dim=0)
            plain[p + proj + ".weight"] = deq.t().contiguous()
    for sub, tensors, extra in (("awq", awq, {"quantization_config": {"quant_method": "awq", "bits": 4,
                                                                      "group_size": GROUP, "zero_point": True,
                                                                      "version": "gemm"}}),
                                ("dequant", plain, {})):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
        save_file(tensors, os.path.join(a.out, sub, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(a.out, sub, "config.json"), "w") as f:
            json.dump({**c, **extra}, f, indent=1)
        write_byte_tokenizer(os.path.join(a.out, sub), c["vocab_size"])
    print(f"wrote {a.out}/awq and {a.out}/dequant")


if __name__ == "__main__":
    main()
