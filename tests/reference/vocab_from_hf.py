#!/usr/bin/env python3
"""A vocabulary-only GGUF from a Hugging Face tokenizer.json, for checking
glesllm's tokenizers against llama.cpp's on a real vocabulary
(vocab_reference.py; test_tokenizer's tests/data/vocab). Writes what
llama.cpp's loader reads:

  spm   SentencePiece as BPE with byte fallback (Gemma): tokenizer.ggml.model
        "llama", no space prefix; a piece's score minus the rank of the merge
        that makes it; the added tokens control (special) or user-defined,
        and <unusedN>, <start_of_turn>, <end_of_turn>, <mask>, <2mass> and
        [@BOS@] user-defined (their type in Gemma's tokenizer.model, which
        Gemma 2's tokenizer.json does not keep)
  bpe   byte-level BPE (Llama 3, Qwen): "gpt2" with the merges; the added
        tokens control (special) or user-defined

Scores and types that tokenizer.json lacks are this script's guesses, so
the file is a real vocabulary under a stated rule, not the model's own GGUF.

usage: vocab_from_hf.py spm|bpe tokenizer.json out.gguf ARCH PRE BOS EOS ADD_BOS(0|1)
"""
import json
import re
import struct
import sys


def gguf_str(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b


def main():
    kind, src, out, arch, pre = sys.argv[1:6]
    bos, eos, add_bos = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8] == '1'
    t = json.load(open(src, encoding='utf-8'))
    m = t['model']
    added = t.get('added_tokens', [])
    n = max([max(m['vocab'].values())] + [a['id'] for a in added]) + 1
    toks, types = [None] * n, [1] * n
    for k, v in m['vocab'].items():
        toks[v] = k
    for a in added:
        toks[a['id']] = a['content']
    merges = [x if isinstance(x, str) else ' '.join(x) for x in m.get('merges', [])]
    kvs = []

    def kv(key, typ, val):
        kvs.append(gguf_str(key) + struct.pack('<I', typ) + val)

    def arr(key, typ, fmt, vals):
        kv(key, 9, struct.pack('<IQ', typ, len(vals)) + struct.pack('<%d%s' % (len(vals), fmt), *vals))

    if kind == 'spm':
        rank = {}
        for r, mg in enumerate(merges):
            rank.setdefault(mg.replace(' ', ''), r)
        user = re.compile(r'^(<unused\d+>|<start_of_turn>|<end_of_turn>|<mask>|<2mass>|\[@BOS@\])$')
        scores = []
        for i, s in enumerate(toks):
            if s is None:
                scores.append(0.0)
                continue
            if re.match(r'^<0x[0-9A-F]{2}>$', s):
                types[i] = 6
            elif user.match(s):
                types[i] = 4
            scores.append(-float(rank[s]) if s in rank else -float(len(merges) + i))
        for a in added:  # (Gemma 3's file lists its user-defined pieces here)
            types[a['id']] = (2 if a['content'] == m.get('unk_token') else 3) if a['special'] else 4
    else:
        for a in added:
            types[a['id']] = 3 if a['special'] else 4
    for i in range(n):
        if toks[i] is None:
            toks[i], types[i] = '[PAD%d]' % i, 5
    kv('general.architecture', 8, gguf_str(arch))
    kv('general.name', 8, gguf_str('vocabulary of ' + src))
    for k, v in [('context_length', 8192), ('embedding_length', 64), ('block_count', 1),
                 ('feed_forward_length', 128), ('attention.head_count', 1),
                 ('attention.head_count_kv', 1)]:
        kv('%s.%s' % (arch, k), 4, struct.pack('<I', v))
    kv('%s.attention.layer_norm_rms_epsilon' % arch, 6, struct.pack('<f', 1e-6))
    kv('tokenizer.ggml.model', 8, gguf_str('llama' if kind == 'spm' else 'gpt2'))
    kv('tokenizer.ggml.pre', 8, gguf_str(pre))
    kv('tokenizer.ggml.tokens', 9, struct.pack('<IQ', 8, n) + b''.join(gguf_str(x) for x in toks))
    arr('tokenizer.ggml.token_type', 5, 'i', types)
    if kind == 'spm':
        arr('tokenizer.ggml.scores', 6, 'f', scores)
        kv('tokenizer.ggml.add_space_prefix', 7, b'\x00')
    else:
        kv('tokenizer.ggml.merges', 9,
           struct.pack('<IQ', 8, len(merges)) + b''.join(gguf_str(x) for x in merges))
    kv('tokenizer.ggml.bos_token_id', 4, struct.pack('<I', bos))
    kv('tokenizer.ggml.eos_token_id', 4, struct.pack('<I', eos))
    kv('tokenizer.ggml.add_bos_token', 7, b'\x01' if add_bos else b'\x00')
    with open(out, 'wb') as f:
        f.write(b'GGUF' + struct.pack('<IQQ', 3, 0, len(kvs)) + b''.join(kvs))
        f.write(b'\0' * ((-f.tell()) % 32))
    print('%s: %d tokens, %d merges' % (out, n, len(merges)))


if __name__ == '__main__':
    main()
