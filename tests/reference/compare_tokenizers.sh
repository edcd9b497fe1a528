#!/bin/bash
# glesllm tokenize against llama.cpp's llama-tokenize on one vocabulary
# (vocab_from_hf.py makes one from a tokenizer.json): 150 pieces of TEXT of
# 1 to 400 characters and 25 edge cases (spaces, newlines, tabs, special-token
# text, scripts, emoji, code), each as plain text and with special tokens
# parsed. Prints each difference and the counts; exits 1 on any.
# usage: compare_tokenizers.sh VOCAB.gguf LLAMA_TOKENIZE GLESLLM TEXT
set -u
vocab=$1 lt=$2 gl=$3 text=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$text" "$dir" <<'PY'
import random, sys
random.seed(3)
t = open(sys.argv[1], encoding='utf-8', errors='replace').read()
s = []
for i in range(150):
    a = random.randrange(max(1, len(t) - 400)); s.append(t[a:a + random.choice([1, 3, 10, 40, 120, 400])])
s += ["Hello world", " leading space", "  two leading", "trailing  ", "\n\nnew\n\n\nlines\n",
      "\ttab\t\tcode()", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
      "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|><|start_header_id|>x<|eot_id|>",
      "text<unused5>more <mask> <2mass>", "\u00dcn\u00efc\u00f6d\u00e9 fa\u00e7ade \u2014 \u201cq\u201d \u2026",
      "\u65e5\u672c\u8a9e\u3001\u4e2d\u6587\u3002\ud55c\uad6d\uc5b4", "emoji \U0001F600\U0001F389\U0001F44D\U0001F3FD",
      "\ufb01 \uff21\uff22", "def f(x):\n    return x**2  # c\n", "<div class=\"a\">html</div>",
      "1234567890 3.14159 1e-9 0x1F", "a" * 50, " " * 17, "\u00a0nbsp\u200bzw",
      "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439", "\u0645\u0631\u062d\u0628\u0627",
      "\u2115 \u2211 \u222b \u221a", "\r\nwindows\r\n", "x"]
for i, x in enumerate(s):
    open('%s/%03d.txt' % (sys.argv[2], i), 'w', encoding='utf-8').write(x)
PY
bad=0
for mode in plain special; do
  same=0 diff=0
  for f in "$dir"/*.txt; do
    if [ $mode = plain ]; then lf=--no-parse-special gf=; else lf= gf=--special; fi
    a=$("$lt" -m "$vocab" -f "$f" --ids --log-disable $lf 2>/dev/null | tail -1 | tr -d '[],')
    b=$("$gl" tokenize -m "$vocab" -f "$f" --ids $gf 2>/dev/null)
    if [ "$a" == "$b" ]; then same=$((same + 1)); else
      diff=$((diff + 1)); echo "$mode $(basename "$f"): llama.cpp [$a] glesllm [$b]" | cut -c1-400; fi
  done
  echo "$(basename "$vocab") $mode: $same the same, $diff differ"
  bad=$((bad + diff))
done
[ $bad = 0 ]
