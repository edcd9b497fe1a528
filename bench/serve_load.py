#!/usr/bin/env python3
"""Aggregate generation speed of an OpenAI-compatible server (glesllm serve,
llama-server) under N concurrent streams: each stream one streamed
/v1/completions request of N_GEN tokens (ignore_eos, greedy), all started at
once; the aggregate is the tokens of all over the wall time from the first
start to the last end; time to first token per stream. Python's standard
library only, loopback only.

    serve_load.py URL [--streams 1,4,8] [--n-gen 128] [--prompt TEXT | --prompt-ids 1,2,3]
                  [--distinct] [--key KEY]

Each count of streams runs once unmeasured first (a server's first pass of
that many sequences may build its kernels). --distinct makes every request's
prompt its own from the second token on (a number in the text, another id
in the ids), so that no server finds it in a cache: each prompt runs.
"""
import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request


def one_stream(url, key, prompt, n_gen, out, i):
    body = json.dumps({"prompt": prompt, "max_tokens": n_gen, "temperature": 0,
                       "ignore_eos": True, "stream": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    t0 = time.monotonic()
    first, tokens = None, 0
    try:
        r = urllib.request.urlopen(req, timeout=600)
    except urllib.error.HTTPError as e:
        print(f"serve_load: {url}: HTTP {e.code}: {e.read().decode('utf-8', 'replace')}",
              file=sys.stderr)
        return
    with r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices", []):
                if ch.get("text"):
                    tokens += 1  # (one event a token on both servers)
                    if first is None:
                        first = time.monotonic()
            usage = ev.get("usage")
            if usage:
                tokens = usage.get("completion_tokens", tokens)
    out[i] = (t0, first or time.monotonic(), time.monotonic(), tokens)


SENT = [0]


def distinct(prompt):
    """the prompt with this request's number in it, from its second token on"""
    SENT[0] += 1
    k = SENT[0]
    if isinstance(prompt, list):
        return prompt[:1] + [100 + (prompt[1] + 7919 * k) % 30000] + prompt[2:]
    return f"{k}. {prompt}"


def run(url, key, prompt, n_gen, streams, vary):
    out = [None] * streams
    threads = [threading.Thread(target=one_stream,
                                args=(url, key, distinct(prompt) if vary else prompt, n_gen,
                                      out, i))
               for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in out:
        sys.exit("serve_load: a stream failed (above)")
    start = min(o[0] for o in out)
    end = max(o[2] for o in out)
    tokens = sum(o[3] for o in out)
    ttft = sorted((o[1] - o[0]) * 1e3 for o in out)
    return tokens, end - start, ttft


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--streams", default="1,4,8")
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--prompt", default="Once upon a time, in a land far away, there lived")
    ap.add_argument("--prompt-ids", default=None,
                    help="the prompt as token ids (a file whose vocabulary a server cannot "
                         "tokenize with)")
    ap.add_argument("--distinct", action="store_true",
                    help="every request's prompt its own (no cache holds it)")
    ap.add_argument("--key", default=None)
    a = ap.parse_args()
    prompt = [int(x) for x in a.prompt_ids.split(",")] if a.prompt_ids else a.prompt
    print("| streams | tokens | seconds | aggregate tokens/s | per stream | TTFT median / max ms |")
    print("|---|---|---|---|---|---|")
    for n in [int(x) for x in a.streams.split(",")]:
        run(a.url, a.key, prompt, 8, n, a.distinct)  # warm-up
        tokens, sec, ttft = run(a.url, a.key, prompt, a.n_gen, n, a.distinct)
        print(f"| {n} | {tokens} | {sec:.2f} | {tokens / sec:.1f} | {tokens / sec / n:.1f} | "
              f"{ttft[len(ttft) // 2]:.0f} / {ttft[-1]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
