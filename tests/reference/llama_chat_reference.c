/* llama.cpp's chat formatting of tests/reference/chat_conversations.h: the
 * reference test_chat compares glesllm_chat_apply with. A tool, not part of
 * the build: compile it against a llama.cpp build of February 2025,
 * outside this project:
 *
 *   cc -O2 llama_chat_reference.c -I LLAMA/include -I LLAMA/ggml/include \
 *      -L LLAMA_BUILD/bin -lllama -lggml -lggml-base -o llama_chat_reference
 *   llama_chat_reference > llama-chat.jsonl
 *
 * A line a template (each built-in name, then each Jinja fragment by its
 * index), conversation and add_assistant: the text, as a JSON string, or
 * "unsupported" set where llama.cpp recognises no template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#include "chat_conversations.h"

static void json_string(const char *s, int n)
{
    putchar('"');
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            printf("\\n");
        else if (c == '\t')
            printf("\\t");
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void one(const char *tmpl, const char *key, int conv, int add)
{
    struct llama_chat_message msgs[8];
    for (int i = 0; i < chat_convs[conv].n; i++) {
        msgs[i].role = chat_convs[conv].turns[i].role;
        msgs[i].content = chat_convs[conv].turns[i].content;
    }
    static char buf[1 << 16];
    int n = llama_chat_apply_template(tmpl, msgs, (size_t)chat_convs[conv].n, add, buf, sizeof buf);
    printf("{\"template\": \"%s\", \"conv\": %d, \"add\": %d, ", key, conv, add);
    if (n < 0)
        printf("\"unsupported\": 1}\n");
    else {
        printf("\"text\": ");
        json_string(buf, n);
        printf("}\n");
    }
}

int main(void)
{
    const char *names[64];
    int n = llama_chat_builtin_templates(names, 64);
    for (int t = 0; t < n && t < 64; t++)
        for (int c = 0; c < CHAT_N_CONVS; c++)
            for (int a = 0; a < 2; a++)
                one(names[t], names[t], c, a);
    for (size_t j = 0; j < CHAT_N_JINJA; j++) {
        char key[16];
        snprintf(key, sizeof key, "jinja%zu", j);
        one(chat_jinja[j], key, 0, 1);
    }
    return 0;
}
