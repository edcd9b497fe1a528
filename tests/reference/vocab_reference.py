#!/usr/bin/env python3
"""llama.cpp's ids on a vocabulary, for test_tokenizer's real vocabularies
(tests/data/vocab): texts cut from TEXT files (150 pieces of 1 to 400
characters) and edge cases (spaces, newlines, tabs, special-token text,
other scripts, emoji, code) to OUT.inp (each followed by
"\\n__ggml_vocab_test__\\n", as llama.cpp's test files), and the ids
llama-tokenize gives each (no BOS, special tokens not parsed) to OUT.out, a
line each. With --glesllm PATH it also compares `glesllm tokenize` with
llama-tokenize on every text, plain and with special tokens parsed, and
exits 1 on any difference.

usage: vocab_reference.py LLAMA_TOKENIZE VOCAB.gguf OUT TEXT... [--glesllm PATH]
"""
import os
import random
import subprocess
import sys
import tempfile

EDGE = ["Hello world", " leading space", "  two leading", "trailing  ", "\n\nnew\n\n\nlines\n",
        "\ttab\t\tcode()", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
        "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|><|start_header_id|>x<|eot_id|>",
        "text<unused5>more <mask> <2mass>", "\u00dcn\u00efc\u00f6d\u00e9 fa\u00e7ade \u2014 \u201cq\u201d \u2026",
        "\u65e5\u672c\u8a9e\u3001\u4e2d\u6587\u3002\ud55c\uad6d\uc5b4",
        "emoji \U0001F600\U0001F389\U0001F44D\U0001F3FD", "\ufb01 \uff21\uff22",
        "def f(x):\n    return x**2  # c\n", "<div class=\"a\">html</div>",
        "1234567890 3.14159 1e-9 0x1F", "a" * 50, " " * 17, "\u00a0nbsp\u200bzw",
        "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439",
        "\u0645\u0631\u062d\u0628\u0627", "\u2115 \u2211 \u222b \u221a", "\r\nwindows\r\n", "x"]
SEP = "\n__ggml_vocab_test__\n"


def ids(cmd, path):
    out = subprocess.run(cmd + ['-f', path], capture_output=True, text=True, check=True).stdout
    return ' '.join(out.strip().splitlines()[-1].strip('[]').replace(',', ' ').split()) if out.strip() else ''


def main():
    args = sys.argv[1:]
    gl = None
    if '--glesllm' in args:
        i = args.index('--glesllm')
        gl = args[i + 1]
        del args[i:i + 2]
    lt, vocab, out = args[:3]
    text = ''.join(open(p, encoding='utf-8').read() for p in args[3:])
    random.seed(3)
    texts = []
    for _ in range(150):
        a = random.randrange(max(1, len(text) - 400))
        texts.append(text[a:a + random.choice([1, 3, 10, 40, 120, 400])])
    texts = [t for t in texts + EDGE if t and SEP.strip() not in t]
    lcp = [lt, '-m', vocab, '--ids', '--log-disable', '--no-bos']
    bad = 0
    with tempfile.TemporaryDirectory() as d, open(out + '.inp', 'w', encoding='utf-8', newline='') as fi, \
            open(out + '.out', 'w', encoding='utf-8', newline='') as fo:
        for k, t in enumerate(texts):
            p = os.path.join(d, 't.txt')
            open(p, 'w', encoding='utf-8', newline='').write(t)
            plain = ids(lcp + ['--no-parse-special'], p)
            fi.write(t + SEP)
            fo.write(' ' + plain + '\n')
            if gl:
                for mode, lf, gf in (('plain', ['--no-parse-special'], []), ('special', [], ['--special'])):
                    want = plain if lf else ids(lcp, p)
                    got = ids([gl, 'tokenize', '-m', vocab, '--ids', '--no-bos'] + gf, p)
                    if want != got:
                        bad += 1
                        print('%s text %d %r: llama.cpp [%s] glesllm [%s]' % (mode, k, t[:60], want, got))
    print('%s: %d texts%s' % (out, len(texts), ', %d differences with glesllm' % bad if gl else ''))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
