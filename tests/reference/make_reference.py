#!/usr/bin/env python3
"""References for the model files llama.cpp (of February 2025) does not run:
Hugging Face transformers on the same F32 GGUF bytes, in float64 (float32
for the experts of qwen3moe, as transformers computes them).

  make_reference.py FILE.gguf OUT.jsonl

FILE.gguf: a qwen3, qwen3moe, smollm3 or gemma3 file of F32 tensors, as test_model writes them
(GLESLLM_KEEP_FIXTURES=DIR build/tests/test_model keeps them in DIR). Writes
three cases in ../shared/reference's format (prompt_ids, forced_argmax,
last_top5, greedy, greedy_margin), plus gguf_fnv1a: the FNV-1a of the file
as two 32-bit halves, which the test compares with the file it makes.

Needs numpy, torch and transformers (Qwen3 and Qwen3-MoE: 4.51 or later;
SmolLM3: 4.53 or later; Gemma 3: 4.50 or later).
"""
import json
import re
import struct
import sys

import numpy as np
import torch


def read_gguf(path):
    """The metadata and F32 tensors (numpy, rows last-dimension-first as
    PyTorch's [out, in]) of a GGUF file."""
    b = open(path, 'rb').read()
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, b, pos)[0]
        pos += struct.calcsize('<' + fmt)
        return v

    def rstr():
        nonlocal pos
        n = rd('Q')
        s = b[pos:pos + n].decode('utf-8', 'replace')
        pos += n
        return s

    scalar = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q',
              12: 'd'}

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            at, n = rd('I'), rd('Q')
            return [rval(at) for _ in range(n)]
        return rd(scalar[t])

    if b[:4] != b'GGUF':
        sys.exit(f'{path}: not a GGUF file')
    pos = 4
    rd('I')
    n_tensors, n_kv = rd('Q'), rd('Q')
    kv = {}
    for _ in range(n_kv):
        k = rstr()
        kv[k] = rval(rd('I'))
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        ne = [rd('Q') for _ in range(rd('I'))]
        infos.append((name, ne, rd('I'), rd('Q')))
    align = kv.get('general.alignment', 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, typ, off in infos:
        if typ != 0:
            sys.exit(f'{name}: type {typ}; this script reads F32 files only')
        a = np.frombuffer(b, dtype=np.float32, count=int(np.prod(ne)), offset=base + off)
        tensors[name] = torch.from_numpy(a.reshape(list(reversed(ne))).copy())
    h = 14695981039346656037
    for byte in b:
        h = ((h ^ byte) * 1099511628211) & 0xffffffffffffffff
    return kv, tensors, h


def build(kv, t):
    import transformers
    arch = kv['general.architecture']

    def g(k, d=None):
        return kv.get(f'{arch}.{k}', d)

    n_embd, n_head = g('embedding_length'), g('attention.head_count')
    common = dict(vocab_size=t['token_embd.weight'].shape[0], hidden_size=n_embd,
                  num_hidden_layers=g('block_count'), num_attention_heads=n_head,
                  num_key_value_heads=g('attention.head_count_kv', n_head),
                  head_dim=g('attention.key_length', n_embd // n_head),
                  rms_norm_eps=g('attention.layer_norm_rms_epsilon'),
                  rope_theta=g('rope.freq_base'), max_position_embeddings=g('context_length'),
                  tie_word_embeddings='output.weight' not in t, attention_bias=False,
                  intermediate_size=g('feed_forward_length'))
    if arch == 'qwen3':
        cfg = transformers.Qwen3Config(**common)
        model = transformers.Qwen3ForCausalLM(cfg)
    elif arch == 'qwen3moe':
        cfg = transformers.Qwen3MoeConfig(
            moe_intermediate_size=g('expert_feed_forward_length'), num_experts=g('expert_count'),
            num_experts_per_tok=g('expert_used_count'), norm_topk_prob=True,
            decoder_sparse_step=1, mlp_only_layers=[], **common)
        model = transformers.Qwen3MoeForCausalLM(cfg)
    elif arch == 'smollm3':
        # (every fourth layer without RoPE, as llama.cpp reads these files)
        n = g('block_count')
        cfg = transformers.SmolLM3Config(
            no_rope_layer_interval=4, no_rope_layers=[int((i + 1) % 4 != 0) for i in range(n)],
            use_sliding_window=False, pad_token_id=None, bos_token_id=None, eos_token_id=None,
            **common)
        model = transformers.SmolLM3ForCausalLM(cfg)
    elif arch == 'gemma3':
        # (llama.cpp's reading: the window on all layers but every sixth,
        # which turn by RoPE of base 1e6 scaled as the file says; the window
        # layers by 10000 unscaled; queries scaled by 1 / sqrt(head_dim))
        n = g('block_count')
        scaling = None
        if g('rope.scaling.type') == 'linear':
            scaling = {'rope_type': 'linear', 'factor': float(g('rope.scaling.factor'))}
        cfg = transformers.Gemma3TextConfig(
            query_pre_attn_scalar=common['head_dim'], sliding_window=g('attention.sliding_window'),
            layer_types=['full_attention' if (i + 1) % 6 == 0 else 'sliding_attention'
                         for i in range(n)],
            rope_local_base_freq=10000.0, rope_scaling=scaling, final_logit_softcapping=None,
            attn_logit_softcapping=None, hidden_activation='gelu_pytorch_tanh',
            pad_token_id=None, bos_token_id=None, eos_token_id=None, **common)
        model = transformers.Gemma3ForCausalLM(cfg)
    else:
        sys.exit(f'architecture {arch}: this script makes qwen3, qwen3moe, smollm3 and gemma3 '
                 'references')

    def unpermute(w, heads):
        """llama.cpp's converter reorders a llama's Q and K rows for its RoPE on
        adjacent pairs: back to Hugging Face's halves"""
        return w.reshape(heads, w.shape[0] // heads // 2, 2, -1).transpose(1, 2).reshape(w.shape)
    names = {'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight':
             'output_norm.weight', 'lm_head.weight': 'output.weight'}
    per_layer = {'input_layernorm': 'attn_norm', 'post_attention_layernorm': 'ffn_norm',
                 'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k',
                 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
                 'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm',
                 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
                 'mlp.gate': 'ffn_gate_inp'}
    if arch == 'gemma3':  # (its norms before and after attention and the FFN)
        per_layer.update({'post_attention_layernorm': 'post_attention_norm',
                          'pre_feedforward_layernorm': 'ffn_norm',
                          'post_feedforward_layernorm': 'post_ffw_norm'})
    sd = {}
    for key, p in model.state_dict().items():
        if key == 'lm_head.weight' and cfg.tie_word_embeddings:
            sd[key] = t['token_embd.weight']
            continue
        # (Gemma's norms multiply by 1 + w; llama.cpp's converter writes w + 1)
        gemma_norm = arch == 'gemma3' and 'norm' in key
        if key in names:
            sd[key] = t[names[key]] - (1.0 if gemma_norm else 0.0)
            continue
        m = re.match(r'model\.layers\.(\d+)\.(.+)\.weight$', key)
        if m and m.group(2) in per_layer:
            w = t[f'blk.{m.group(1)}.{per_layer[m.group(2)]}.weight']
            if arch == 'smollm3' and m.group(2) in ('self_attn.q_proj', 'self_attn.k_proj'):
                w = unpermute(w, cfg.num_attention_heads if 'q_proj' in m.group(2)
                              else cfg.num_key_value_heads)
            sd[key] = w - (1.0 if gemma_norm else 0.0)
            continue
        # experts: one module an expert, or (newer transformers) stacked
        m = re.match(r'model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$', key)
        if m:
            sd[key] = t[f'blk.{m.group(1)}.ffn_{m.group(3)}_exps.weight'][int(m.group(2))]
            continue
        m = re.match(r'model\.layers\.(\d+)\.mlp\.experts\.(gate_up|down)_proj$', key)
        if m:
            blk = f'blk.{m.group(1)}'
            w = (torch.cat([t[f'{blk}.ffn_gate_exps.weight'], t[f'{blk}.ffn_up_exps.weight']], 1)
                 if m.group(2) == 'gate_up' else t[f'{blk}.ffn_down_exps.weight'])
            sd[key] = w if w.shape == p.shape else w.transpose(1, 2)
            continue
        sys.exit(f'{key}: no tensor of the file maps to it (transformers {transformers.__version__})')
    # (float64 where transformers allows it: its grouped expert product takes
    # float32 at most)
    dtype = torch.float32 if arch == 'qwen3moe' else torch.float64
    model.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=True)
    return model.to(dtype).eval()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kv, t, h = read_gguf(sys.argv[1])
    model = build(kv, t)
    n_vocab = t['token_embd.weight'].shape[0]
    rng = np.random.default_rng(7)
    cases = []
    for n_prompt in (9, 5, 14):
        ids = [int(kv.get('tokenizer.ggml.bos_token_id', 1))] + \
            [int(x) for x in rng.integers(3, n_vocab, n_prompt - 1)]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        forced = [int(x) for x in logits.argmax(-1)]
        top = torch.topk(logits[-1], 5)
        top5 = [[int(i), round(float(v), 6)] for v, i in zip(top.values, top.indices)]
        seq, greedy, margin = list(ids), [], []
        for _ in range(32):
            with torch.no_grad():
                last = model(torch.tensor([seq])).logits[0, -1]
            v = torch.topk(last, 2)
            greedy.append(int(v.indices[0]))
            margin.append(round(float(v.values[0] - v.values[1]), 5))
            seq.append(greedy[-1])
        cases.append({'model': sys.argv[1].split('/')[-1], 'n_vocab': n_vocab, 'prompt': '',
                      'prompt_ids': ids, 'forced_argmax': forced, 'last_top5': top5,
                      'greedy': greedy, 'greedy_margin': margin,
                      'gguf_fnv1a': [h >> 32, h & 0xffffffff]})
    import transformers
    with open(sys.argv[2], 'w') as f:
        for c in cases:
            f.write(json.dumps(c, separators=(',', ':')) + '\n')
    print(f'{sys.argv[2]}: {len(cases)} cases, transformers {transformers.__version__}, '
          f'smallest greedy margin {min(min(c["greedy_margin"]) for c in cases):.4f}')


if __name__ == '__main__':
    main()
