#!/usr/bin/env python3
"""Greedy ids of `glesllm run` against llama.cpp's references (../shared/reference),
with the prefill matmul's f32 tiles and its f16 tiles (GLESLLM_MATMUL=...,2, drivers
with GL_NV_gpu_shader5), and f16 against f32 on random 64-token prompts.

  bench/refcheck.py MODELS_DIR REFERENCE_DIR NAME [NAME...]   (NAME: tiny-spm-f32, ...)

A reference's greedy ids must match up to its first near-tie: a margin <= 1e-3 for
F32 weights, <= 0.05 for quantized ones (llama.cpp rounds activations to 8 bits
there), the rule of tests/test_model.c. Run from the repository root after a build.
"""
import json
import os
import random
import subprocess
import sys

MODES = (('f32', '128,8,4,0'), ('f16', '128,8,4,2'))


def run(model, ids, n, mode):
    env = dict(os.environ, GLESLLM_MATMUL=mode)
    p = subprocess.run(['build/glesllm', 'run', '-m', model, '--prompt-ids',
                        ','.join(map(str, ids)), '-n', str(n), '--temp', '0', '--print-ids',
                        '--ignore-eos'], capture_output=True, text=True, env=env)
    if p.returncode:
        print('  error:', (p.stderr.strip().splitlines() or ['?'])[-1])
        return []
    return list(map(int, p.stdout.split()))


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    models, refs = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        model = os.path.join(models, name + '.gguf')
        lines = [json.loads(l) for l in open(os.path.join(refs, name + '.jsonl'))]
        lim = 1e-3 if 'f32' in name else 0.05
        for r in lines:
            tie = next((i for i, m in enumerate(r['greedy_margin']) if m <= lim),
                       len(r['greedy']))
            res = []
            for label, mode in MODES:
                got = run(model, r['prompt_ids'], len(r['greedy']), mode)
                same = next((i for i, (a, b) in enumerate(zip(got, r['greedy'])) if a != b),
                            min(len(got), len(r['greedy'])))
                res.append(f"{label} {'ok' if got and same >= tie else 'DIFF'} "
                           f"({same} same, near-tie at {tie})")
            print(f"{name}, {len(r['prompt_ids'])}-token prompt: " + ', '.join(res))
        rng = random.Random(7)
        agree, first = 0, []
        for _ in range(8):
            ids = [1] + [rng.randrange(3, lines[0]['n_vocab']) for _ in range(63)]
            a, b = (run(model, ids, 32, mode) for _, mode in MODES)
            d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
            if not a or not b or len(a) != len(b):
                d = -1
            agree += d is None
            if d is not None:
                first.append(d)
        print(f"{name}: f16 greedy == f32 greedy on {agree} of 8 random 64-token prompts; "
              f"first differences at {first}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
