#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""ingot's SentencePiece-style BPE (src/llm/sentencepiece.*) against its oracles, on a corpus.

Hugging Face `tokenizers` builds the tokenizers here, nothing is downloaded: a BPE is trained on a
corpus written below (English, code, numbers, whitespace runs, newlines, accented, Greek, Cyrillic
and CJK text, emoji), then laid out as Llama 2's tokenizer.json is (<unk> <s> </s>, the 256 <0xXX>
byte tokens, the learned pieces) in several variants: Llama 2's normalizer (Prepend "▁", Replace
" " -> "▁") and decoder chain (Replace, ByteFallback, Fuse, Strip); Gemma's (Replace only, no
Strip); a Metaspace pre-tokenizer with prepend_scheme first / always / never, split on and off, in
the current spelling and the older add_prefix_space one; without byte_fallback (unknown characters
to <unk>, fused or not); with ignore_merges; without a decoder. Added tokens: special ones, plain
ones, and where there is no normalizer normalized ones (matched after the others). Some are trained
on whole lines, so their merges cross words and the whole-text merge (no regex pre-split) is what is
tested. ingot (tests/llm/tokenizer_run.cc) reads each saved tokenizer.json and must give the
library's ids for every line of a held-out corpus (its rarer characters and emoji are not in the
training alphabet, so they fall back to bytes or <unk>), and the library's
decode(ids, skip_special_tokens=False) for those ids and for random id lists (byte tokens that do
not form UTF-8 among them).

The same vocabulary written as a GGUF "llama" vocabulary by the `gguf` package (scores, token
types: unknown, control, user-defined, unused, byte) is checked against llama.cpp itself through
llama-cpp-python (vocab_only): llama_tokenize(parse_special=True), llama_detokenize(unparse_special=
True) and llama_token_to_piece(special=True) for every token, with add_space_prefix on and off.

Prints PASS/FAIL per variant with the agreement counts; exits non-zero on any mismatch.

Usage: test_tokenizers_oracle.py --run build/tests/tokenizer_run
"""
import argparse
import ctypes
import json
import os
import random
import subprocess
import sys
import tempfile

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPACE = "\u2581"
SPECIALS = ["<unk>", "<s>", "</s>"]
USER_TOKENS = ["<|user|>", "<|assistant|>", "[INST]"]
# Added tokens with normalized=True (only where there is no normalizer: ingot refuses them under
# one). `tokenizers` matches them after the others, in the stretches left: "ok<|user|>" is "ok",
# "<|user|>", never "ok<|".
NORMALIZED_TOKENS = ["[/INST]", "ok<|"]

WORDS = ("the of and to in is that it for was on are as with his they at be this from have or by one had "
         "not but what all were when we there can an your which their said if do will each about how up out "
         "them then she many some so these would other into has more her two like him see time could no make "
         "than first been its who now people my made over did down only way find use may water long little "
         "very after words called just where most know get through back much before go good new write our "
         "used me man too any day same right look think also around another came come work three word must "
         "because does part even place well such here take why things help put years different away again "
         "tokenizer merges vocabulary engine kernel tensor gradient inference compile runtime").split()
ACCENTED = "naïve café crème brûlée façade São Paulo Zürich Ærøskøbing élève über Straße coöperate piñata".split()
GREEK = "Ελληνικά καλημέρα κόσμε αλφάβητο".split()
CYRILLIC = "русский привет мир язык текст".split()
CJK = list("日本語のテキスト東京は首都です中文测试一二三四五六七八九十") + ["한국어", "텍스트"]
EMOJI = ["\U0001f642", "\U0001f680", "\u2764\ufe0f", "\U0001f469\u200d\U0001f4bb", "\U0001f1eb\U0001f1f7", "\U0001f980"]
CODE = ["def f(x):\n    return x ** 2", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "if x == None: pass", "print(f\"{value:>8.3f}\")", "#include <vector>", "x = [1, 2, 3]  # list",
        "SELECT * FROM t WHERE id = 42;", "fn main() { println!(\"hi\"); }", "a && b || !c", "<div class=\"x\">"]
# Held out only: characters the training corpus never shows (byte fallback or <unk>), and more.
RARE = ["Ωμέγα", "ॐ नमस्ते", "مرحبا", "שלום", "ไทย", "\U0001f600\U0001f600", "\U0001f43b\u200d\u2744\ufe0f",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\u00a0nbsp\u00a0", "zero\u200bwidth", "tab\there", "cr\r\nlf", "\x01\x02ctl", "∑∫√∞≠",
        "Ꭰ", "\u0301combining", "ü (u\u0308)", "𠜎𠜱", "\ufeffbom"]
FIXED = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "In 2026, 1234567 items cost $3.50 each (about 4,320,000 in all).",
    "I'll say we've seen they're right; it's John's and I'd go.",
    "naïve café, Zürich, São Paulo, Ελληνικά, русский, 日本語のテキスト, 한국어, emoji \U0001f642\U0001f680!",
    "def f(x):\n    return x ** 2  # squares\n\n\tindented\t\ttabs",
    "a   b    c\n\n\nd  ",
    "   leading spaces and trailing ones   ",
    " ", "  ", "\n", "x", "",
    "<s>Hello</s> again <s>",
    "<s> [INST] What is 2+2? [INST] <|user|>hi<|assistant|>four</s>",
    "<unk> and <s<s>> and </s </s>",
    "x<|user|> y <|assistant|>  z",
    "▁already▁metaspace ▁ x",
    "<0x41> is not a byte token in text",
    "ok<|user|> and [/INST] ok<| x [/INST][INST]ok<|assistant|>",
]


def line(rng, with_specials):
    """One random corpus line: words, numbers, code, whitespace runs, accented/CJK text, emoji."""
    parts = []
    for _ in range(rng.randint(1, 14)):
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(WORDS).capitalize() if rng.random() < 0.15 else rng.choice(WORDS))
        elif r < 0.58:
            parts.append(str(rng.choice([rng.randint(0, 99), rng.randint(100, 10**7), rng.random() * 1000])))
        elif r < 0.66:
            parts.append(rng.choice(ACCENTED))
        elif r < 0.70:
            parts.append(rng.choice(GREEK + CYRILLIC))
        elif r < 0.76:
            parts.append("".join(rng.choice(CJK) for _ in range(rng.randint(1, 6))))
        elif r < 0.80:
            parts.append(rng.choice(EMOJI))
        elif r < 0.86:
            parts.append(rng.choice(CODE))
        elif r < 0.92:
            parts.append(rng.choice([",", ".", "!", "?", ";", ":", "...", "--", "(", ")", "\"", "'"]))
        elif with_specials and r < 0.95:
            parts.append(rng.choice(SPECIALS[1:] + USER_TOKENS + NORMALIZED_TOKENS))
        else:
            parts.append(rng.choice(RARE) if with_specials else rng.choice(WORDS))
    seps = [" "] * 12 + ["  ", "   ", "\n", "\n\n", "\t", " \n", ""]
    out = parts[0]
    for p in parts[1:]:
        out += rng.choice(seps) + p
    if rng.random() < 0.1:
        out = rng.choice([" ", "  ", "\n"]) + out
    if rng.random() < 0.1:
        out += rng.choice([" ", "   ", "\n"])
    return out


def train(corpus, whole_lines, vocab_size):
    """A BPE trained by `tokenizers`, laid out as Llama 2's: specials, the 256 byte tokens, pieces.
    whole_lines: merges may cross words (no pre-tokenizer while training); else Metaspace words."""
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    if not whole_lines:
        t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True)
    t.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, limit_alphabet=120, show_progress=False))
    trained = json.loads(t.to_str())["model"]
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    return vocab, merges


def llama2_decoder():
    return decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                              decoders.Strip(" ", 1, 0)])


def build(vocab, merges, *, normalizer=None, pre=None, decoder=None, byte_fallback=True, unk="<unk>",
          fuse_unk=True, ignore_merges=False):
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=byte_fallback, unk_token=unk,
                             fuse_unk=fuse_unk, ignore_merges=ignore_merges))
    if normalizer is not None:
        t.normalizer = normalizer
    if pre is not None:
        t.pre_tokenizer = pre
    if decoder is not None:
        t.decoder = decoder
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    t.add_tokens([AddedToken(s, special=False, normalized=False) for s in USER_TOKENS])
    if normalizer is None:
        t.add_tokens([AddedToken(s, special=False, normalized=True) for s in NORMALIZED_TOKENS])
    return t


def variants(words_vocab, lines_vocab):
    """name -> (tokenizer, JSON text ingot reads). The JSON is `tokenizers`' own save, except for
    the older Metaspace spelling, which `tokenizers` reads back to build the oracle."""
    wv, wm = words_vocab
    lv, lm = lines_vocab
    llama2_norm = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    out = {
        "llama2 (Prepend+Replace, Sequence decoder)": build(wv, wm, normalizer=llama2_norm, decoder=llama2_decoder()),
        "llama2, merges across words": build(lv, lm, normalizer=llama2_norm, decoder=llama2_decoder()),
        "Gemma-style (Replace only, decoder without Strip)": build(
            wv, wm, normalizer=normalizers.Replace(" ", SPACE),
            decoder=decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])),
        "Metaspace first, no split (Mistral)": build(
            lv, lm, pre=pre_tokenizers.Metaspace(SPACE, prepend_scheme="first", split=False), decoder=llama2_decoder()),
        "Metaspace always, split, Metaspace decoder": build(
            lv, lm, pre=pre_tokenizers.Metaspace(SPACE, prepend_scheme="always", split=True),
            decoder=decoders.Metaspace(SPACE, prepend_scheme="always", split=True)),
        "Metaspace first, split, Metaspace decoder": build(
            wv, wm, pre=pre_tokenizers.Metaspace(SPACE, prepend_scheme="first", split=True),
            decoder=decoders.Metaspace(SPACE, prepend_scheme="first", split=True)),
        "Metaspace never, ignore_merges, no byte_fallback, unk not fused": build(
            lv, lm, pre=pre_tokenizers.Metaspace(SPACE, prepend_scheme="never", split=False),
            decoder=decoders.Metaspace(SPACE, prepend_scheme="never", split=False), byte_fallback=False,
            fuse_unk=False, ignore_merges=True),
        "no byte_fallback, unk fused, no decoder": build(
            wv, wm, pre=pre_tokenizers.Metaspace(SPACE, prepend_scheme="first", split=True), byte_fallback=False),
    }
    out = {k: (t, t.to_str()) for k, t in out.items()}
    legacy = json.loads(out["Metaspace always, split, Metaspace decoder"][1])
    for key in ("pre_tokenizer", "decoder"):
        legacy[key] = {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True}
    text = json.dumps(legacy, ensure_ascii=False)
    out["Metaspace add_prefix_space (older spelling)"] = (Tokenizer.from_str(text), text)
    return out


def run_ingot(tool, request, tmp):
    path = os.path.join(tmp, "request.json")
    with open(path, "w") as f:
        json.dump(request, f)
    p = subprocess.run([tool, path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"tokenizer_run failed ({p.returncode}): {p.stderr}")
    return json.loads(p.stdout)


def random_id_lists(rng, vocab_size, n):
    """Id lists for decode: random tokens, byte-token runs (valid and broken UTF-8), specials."""
    lists = []
    for _ in range(n):
        k = rng.randint(1, 16)
        ids = []
        for _ in range(k):
            r = rng.random()
            if r < 0.5:
                ids.append(rng.randrange(vocab_size))
            elif r < 0.8:
                ids.append(3 + rng.choice([0x20, 0x41, 0x0A, 0xE2, 0x96, 0x81, 0xF0, 0x9F, 0x99, 0x82, 0xC3, 0xFF]))
            else:
                ids.append(rng.randrange(3))
        lists.append(ids)
    return lists


def compare(name, texts, want_ids, got_ids, id_lists, want_text, got_text):
    bad = [(t, w, g) for t, w, g in zip(texts, want_ids, got_ids) if w != g]
    bad_dec = [(i, w, g) for i, w, g in zip(id_lists, want_text, got_text) if w != g]
    n_tok = sum(len(w) for w in want_ids)
    n_byte = sum(3 <= i < 259 for w in want_ids for i in w)
    n_unk = sum(i == 0 for w in want_ids for i in w)
    status = "PASS" if not bad and not bad_dec else "FAIL"
    print(f"{status}: {name}: encode {len(texts) - len(bad)}/{len(texts)} texts ({n_tok} tokens, {n_byte} byte "
          f"fallbacks, {n_unk} <unk>), decode {len(id_lists) - len(bad_dec)}/{len(id_lists)} id lists")
    for t, w, g in bad[:3]:
        print(f"    text {t!r}\n      want {w}\n      got  {g}")
    for i, w, g in bad_dec[:3]:
        print(f"    ids {i}\n      want {w!r}\n      got  {g!r}")
    return status == "PASS"


def check_hf(tool, name, tok, text, heldout, rng, tmp):
    path = os.path.join(tmp, "tokenizer.json")
    with open(path, "w") as f:
        f.write(text)
    want = [tok.encode(t, add_special_tokens=False).ids for t in heldout]
    id_lists = want + random_id_lists(rng, tok.get_vocab_size(), 300)
    want_text = [tok.decode(ids, skip_special_tokens=False) for ids in id_lists]
    got = run_ingot(tool, {"tokenizer_json": path, "bos_token": "<s>", "eos_token": "</s>",
                           "texts": [t.encode().hex() for t in heldout], "decode": id_lists}, tmp)
    if not got["ok"]:
        print(f"FAIL: {name}: ingot refused it: {got['error']}")
        return False
    ok = compare(name, heldout, want, got["encode"], id_lists, want_text,
                 [bytes.fromhex(h).decode("utf-8", errors="surrogateescape") for h in got["decode"]])
    if got["bos_id"] != tok.token_to_id("<s>") or got["eos_id"] != tok.token_to_id("</s>"):
        print(f"FAIL: {name}: BOS/EOS ids {got['bos_id']}/{got['eos_id']}")
        ok = False
    return ok


def write_gguf(path, vocab, add_space_prefix):
    """The vocabulary as a GGUF "llama" tokenizer (vocab only): scores in an order unlike the merge
    ranks' (a fixed permutation of the pieces), three pieces to a score (so ties happen), 0 for
    specials and bytes; <unk> unknown, <s> </s> control, the user tokens user-defined, one token
    unused, the <0xXX> tokens bytes."""
    from gguf import GGUFWriter, TokenType
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])] + USER_TOKENS + ["<unused0>"]
    scores, types = [], []
    for i, t in enumerate(tokens):
        if t == "<unk>":
            types.append(TokenType.UNKNOWN)
        elif t in SPECIALS:
            types.append(TokenType.CONTROL)
        elif t in USER_TOKENS:
            types.append(TokenType.USER_DEFINED)
        elif t == "<unused0>":
            types.append(TokenType.UNUSED)
        elif 3 <= i < 259:
            types.append(TokenType.BYTE)
        else:
            types.append(TokenType.NORMAL)
        scores.append(0.0 if i < 259 or types[-1] != TokenType.NORMAL else -float((i - 259) * 7919 % len(vocab) // 3))
    w = GGUFWriter(path, "llama")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(4)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens


def check_llama_cpp(tool, name, vocab, heldout, rng, tmp, add_space_prefix):
    try:
        import llama_cpp
    except ImportError:
        print(f"FAIL: {name}: llama-cpp-python is not installed")
        return False
    path = os.path.join(tmp, f"vocab_{int(add_space_prefix)}.gguf")
    tokens = write_gguf(path, vocab, add_space_prefix)
    llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    v = llama_cpp.llama_model_get_vocab(llm.model)

    def tokenize(text):
        b = text.encode()
        buf = (llama_cpp.llama_token * (2 * len(b) + 8))()
        n = llama_cpp.llama_tokenize(v, b, len(b), buf, len(buf), False, True)
        assert n >= 0, text
        return list(buf[:n])

    def detokenize(ids):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        buf = ctypes.create_string_buffer(64 * len(ids) + 16)
        n = llama_cpp.llama_detokenize(v, arr, len(ids), buf, len(buf), False, True)
        assert n >= 0
        return buf.raw[:n]

    def piece(i):
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(v, i, buf, len(buf), 0, True)
        return buf.raw[:n]

    want = [tokenize(t) for t in heldout]
    id_lists = want + random_id_lists(rng, len(tokens), 300)
    want_text = [detokenize(ids) for ids in id_lists]
    got = run_ingot(tool, {"gguf": path, "texts": [t.encode().hex() for t in heldout], "decode": id_lists,
                           "pieces": True}, tmp)
    if not got["ok"]:
        print(f"FAIL: {name}: ingot refused it: {got['error']}")
        return False
    ok = compare(name, heldout, want, got["encode"], id_lists, want_text, [bytes.fromhex(h) for h in got["decode"]])
    want_pieces = [piece(i) for i in range(len(tokens))]
    bad = [i for i in range(len(tokens)) if bytes.fromhex(got["pieces"][i]) != want_pieces[i]]
    print(f"{'PASS' if not bad else 'FAIL'}: {name}: token_to_piece {len(tokens) - len(bad)}/{len(tokens)} tokens")
    for i in bad[:3]:
        print(f"    token {i} {tokens[i]!r}: want {want_pieces[i]!r} got {bytes.fromhex(got['pieces'][i])!r}")
    meta = (got["bos_id"], got["eos_id"], got["add_bos"])
    want_meta = (llama_cpp.llama_vocab_bos(v), llama_cpp.llama_vocab_eos(v), llama_cpp.llama_vocab_get_add_bos(v))
    if meta != want_meta:
        print(f"FAIL: {name}: BOS/EOS/add_bos {meta}, llama.cpp {want_meta}")
        ok = False
    return ok and not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="the tokenizer_run binary")
    ap.add_argument("--lines", type=int, default=600, help="held-out corpus lines (besides the fixed ones)")
    a = ap.parse_args()
    rng = random.Random(20261205)
    corpus = [line(rng, with_specials=False) for _ in range(3000)]
    heldout = FIXED + [line(rng, with_specials=True) for _ in range(a.lines)]
    words = train(corpus, whole_lines=False, vocab_size=1200)
    lines = train(corpus, whole_lines=True, vocab_size=1200)
    print(f"corpus: {len(corpus)} training lines, {len(heldout)} held-out lines "
          f"({sum(len(t) for t in heldout)} characters); vocabularies of {len(words[0])} and {len(lines[0])}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, (tok, text) in variants(words, lines).items():
            ok &= check_hf(a.run, name, tok, text, heldout, rng, tmp)
        for prefix in (True, False):
            ok &= check_llama_cpp(a.run, f"GGUF llama vocabulary vs llama.cpp, add_space_prefix={prefix}",
                                  words[0], heldout, rng, tmp, prefix)
    print("all agree" if ok else "FAIL: some disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
