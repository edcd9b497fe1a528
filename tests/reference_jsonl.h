/* Reads ../shared/reference/<model>.jsonl: one JSON object per line with
 * number arrays (prompt_ids, forced_argmax, greedy, greedy_margin, last_top5).
 * Just enough JSON for that file, not a general parser. */
#ifndef GLESLLM_REFERENCE_JSONL_H
#define GLESLLM_REFERENCE_JSONL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX 512

typedef struct ref_case {
    char prompt[1024]; /* the prompt text, unescaped */
    int prompt_ids[REF_MAX], n_prompt;
    int forced[REF_MAX], n_forced;
    int greedy[REF_MAX], n_greedy;
    double margin[REF_MAX];
    int n_margin;
    int top5_id[5];
    double top5_logit[5];
    int n_top5;
} ref_case;

/* The numbers of the array after "key": in line, flattened (nested arrays
 * give their numbers in order). Returns how many, or -1 when absent. */
static inline int ref_numbers(const char *line, const char *key, double *out, int max)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != '[')
        return -1;
    int depth = 0, n = 0;
    for (; *p; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']') {
            if (--depth == 0)
                break;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *end;
            double v = strtod(p, &end);
            if (n < max)
                out[n++] = v;
            p = end - 1;
        }
    }
    return n;
}

static inline int ref_ints(const char *line, const char *key, int *out, int max)
{
    double tmp[REF_MAX];
    int n = ref_numbers(line, key, tmp, max < REF_MAX ? max : REF_MAX);
    for (int i = 0; i < n; i++)
        out[i] = (int)tmp[i];
    return n;
}

/* The JSON string after "key": into out (unescaped; \uXXXX below U+0800
 * only, which is all the reference prompts hold). */
static inline void ref_string(const char *line, const char *key, char *out, size_t max)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    size_t n = 0;
    if (p) {
        p += strlen(pat);
        while (*p == ' ')
            p++;
        for (p += *p == '"'; *p && *p != '"' && n + 3 < max; p++) {
            if (*p != '\\') {
                out[n++] = *p;
                continue;
            }
            char e = *++p;
            if (e == 'n')
                out[n++] = '\n';
            else if (e == 't')
                out[n++] = '\t';
            else if (e == 'u') {
                unsigned cp = (unsigned)strtoul((char[5]){ p[1], p[2], p[3], p[4], 0 }, NULL, 16);
                p += 4;
                if (cp < 0x80) {
                    out[n++] = (char)cp;
                } else {
                    out[n++] = (char)(0xc0 | (cp >> 6));
                    out[n++] = (char)(0x80 | (cp & 0x3f));
                }
            } else if (e) {
                out[n++] = e;
            } else {
                break;
            }
        }
    }
    out[n] = 0;
}

/* Reads up to max cases; returns how many (0 when the file is missing). */
static inline int ref_read(const char *path, ref_case *cases, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char line[1 << 16];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        ref_case *c = &cases[n];
        memset(c, 0, sizeof *c);
        ref_string(line, "prompt", c->prompt, sizeof c->prompt);
        c->n_prompt = ref_ints(line, "prompt_ids", c->prompt_ids, REF_MAX);
        c->n_forced = ref_ints(line, "forced_argmax", c->forced, REF_MAX);
        c->n_greedy = ref_ints(line, "greedy", c->greedy, REF_MAX);
        c->n_margin = ref_numbers(line, "greedy_margin", c->margin, REF_MAX);
        double t5[10];
        int k = ref_numbers(line, "last_top5", t5, 10);
        for (int i = 0; i + 1 < k; i += 2) {
            c->top5_id[i / 2] = (int)t5[i];
            c->top5_logit[i / 2] = t5[i + 1];
        }
        c->n_top5 = k / 2;
        if (c->n_prompt > 0)
            n++;
    }
    fclose(f);
    return n;
}

#endif
