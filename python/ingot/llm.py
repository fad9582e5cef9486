# Copyright ingot authors. Apache-2.0.
"""Offline text generation, shaped like TensorRT-LLM's and vLLM's LLM API::

    from ingot import LLM, SamplingParams
    llm = LLM("SmolLM2-135M-Instruct.Q4_1.gguf")
    outs = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16, temperature=0))
    print(outs[0].outputs[0].text)
    llm.chat([{"role": "user", "content": "Hi!"}], SamplingParams(max_tokens=32))

Prompts given together run together (the scheduler's continuous batching over a paged KV cache),
on the CPU reference decoder (fp32) or, with backend="cuda", the GPU decoder (fp16/bf16):
``LLM("Llama-3.2-1B/", backend="cuda", dtype="bfloat16")``. For a server, `ingot serve MODEL`
speaks the OpenAI API.
"""
import json
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

from . import _ingot


__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput"]


@dataclass
class SamplingParams:
    """How to sample: greedy when temperature is 0 (the other filters then do not matter)."""
    max_tokens: int = 16
    temperature: float = 1.0
    top_k: int = 0          # 0 or -1: no top-k filter
    top_p: float = 1.0      # (0, 1]
    seed: Optional[int] = None
    ignore_eos: bool = False
    stop: Optional[Union[str, List[str]]] = None  # not taken offline yet: use `ingot serve`

    def _check(self):
        if self.stop:
            raise ValueError("SamplingParams.stop is not supported by LLM.generate yet; "
                             "`ingot serve MODEL.gguf` takes stop strings")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: List[int]
    finish_reason: str  # "stop", "length" or "model_length"


@dataclass
class RequestOutput:
    request_id: int
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class LLM:
    """A Llama-family model: a GGUF file (weights, tokenizer and chat template) or a Hugging Face
    folder (config.json, safetensors, tokenizer.json), on ingot's CPU reference decoder (fp32) or
    its GPU decoder (paged KV cache, CUDA-graph decode)."""

    def __init__(self, model: str, kv_blocks: int = 0, backend: str = "cpu", dtype: str = "auto",
                 gpu_kv_blocks: int = 4096, quantization: Optional[str] = None, kv_cache_dtype: str = "auto",
                 int4_group: int = 0):
        """backend: "cpu" or "cuda". dtype (cuda): "float16", "bfloat16", or "auto" (the folder's
        config.json torch_dtype when it says bfloat16, else float16). gpu_kv_blocks (cuda): KV cache
        blocks of 16 positions allocated on the GPU at load. quantization: None (as vLLM: the
        checkpoint's own; one stored in 4 bits throughout, AWQ, GPTQ, compressed-tensors W4A16 or a
        Q4 GGUF, runs as int4, others as dtype), "none" (a 4-bit checkpoint's values as dtype
        weights), "fp8" (cuda) for float8 projection weights and activations (Ada/Hopper; as vLLM's
        quantization="fp8"), or "int4" for 4-bit weight-only projections (W4A16: a GGUF's
        Q4_0/Q4_1/Q4_K blocks as they are, others round-to-nearest per group of int4_group at load;
        on the cpu backend the fp32 reference of those weights). self.quantization says what runs.
        kv_cache_dtype (cuda): "auto" (dtype) or "fp8" (float8 e4m3, scales 1, as vLLM's).
        kv_blocks: blocks one generate() call may use (0: enough for every prompt at once)."""
        if backend not in ("cpu", "cuda"):
            raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
        if quantization not in (None, "none", "fp8", "int4"):
            raise ValueError(f"quantization must be None, 'none', 'fp8' or 'int4', got {quantization!r}")
        if kv_cache_dtype not in ("auto", "fp8"):
            raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8', got {kv_cache_dtype!r}")
        if (quantization == "fp8" or kv_cache_dtype == "fp8") and backend != "cuda":
            raise ValueError("fp8 weights and fp8 KV caches run on the GPU decoder: give backend='cuda'")
        if dtype not in ("auto", "float16", "bfloat16"):
            raise ValueError(f"dtype must be 'auto', 'float16' or 'bfloat16', got {dtype!r}")
        if dtype == "auto":
            dtype = "float16"
            cfg = os.path.join(str(model), "config.json")
            if os.path.isdir(str(model)) and os.path.exists(cfg):
                with open(cfg) as f:
                    if json.load(f).get("torch_dtype") == "bfloat16":
                        dtype = "bfloat16"
        self.backend, self.dtype = backend, dtype if backend == "cuda" else "float32"
        self._model = _ingot.LlmModel.load(str(model), backend, dtype == "bfloat16", int(gpu_kv_blocks),
                                           quantization == "fp8", kv_cache_dtype == "fp8", quantization == "int4",
                                           int(int4_group), quantization is None)
        self.quantization = "int4" if self._model.int4_weights() else quantization if quantization != "none" else None
        self._kv_blocks = int(kv_blocks)
        self.last_stats = {}

    def __repr__(self):
        return f"LLM({self._model.describe()})"

    def _run(self, prompts: List[Optional[str]], ids: List[List[int]], params: Optional[SamplingParams]):
        params = params or SamplingParams()
        params._check()
        results, self.last_stats = self._model.generate(ids, int(params.max_tokens), float(params.temperature),
                                                        int(params.top_k), float(params.top_p), params.seed,
                                                        bool(params.ignore_eos), self._kv_blocks)
        return [RequestOutput(i, p, r["prompt_ids"],
                              [CompletionOutput(0, r["text"], r["token_ids"], r["finish_reason"])])
                for i, (p, r) in enumerate(zip(prompts, results))]

    def generate(self, prompts: Union[str, Sequence[str], Sequence[Sequence[int]]],
                 sampling_params: Optional[SamplingParams] = None) -> List[RequestOutput]:
        """One RequestOutput per prompt, in order. Prompts are strings or lists of token ids."""
        if isinstance(prompts, str):
            prompts = [prompts]
        prompts = list(prompts)
        if not prompts:
            raise ValueError("no prompt")
        texts, ids = [], []
        for p in prompts:
            if isinstance(p, str):
                texts.append(p)
                ids.append(self._model.encode_prompt(p))
            else:
                texts.append(None)
                ids.append([int(t) for t in p])
        return self._run(texts, ids, sampling_params)

    def chat(self, messages, sampling_params: Optional[SamplingParams] = None) -> List[RequestOutput]:
        """messages: one conversation (a list of {"role", "content"} dicts) or a list of them; each is
        rendered with the model's ChatML chat template (its default system turn included), the
        assistant's turn opened."""
        convs = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        ids = []
        for conv in convs:
            turns = []
            for m in conv:
                if not isinstance(m, dict) or "role" not in m or not isinstance(m.get("content"), str):
                    raise ValueError("each message is a dict with 'role' and a string 'content'")
                turns.append((m["role"], m["content"]))
            ids.append(self._model.encode_chat(turns))
        return self._run([None] * len(ids), ids, sampling_params)

    def tokenize(self, text: str) -> List[int]:
        return self._model.encode_prompt(text)

    def last_logits(self, prompts: Sequence[Sequence[int]]):
        """The fp32 logits after each prompt's last token, as a (len(prompts), vocab_size) numpy
        array: what the first generated token is sampled from, for comparing ingot with another
        implementation (transformers, llama.cpp) on the same weights."""
        import numpy as np
        ids = [[int(t) for t in p] for p in prompts]
        if not ids:
            raise ValueError("no prompt")
        flat = np.frombuffer(self._model.last_logits(ids), dtype=np.float32)
        return flat.reshape(len(ids), -1)


