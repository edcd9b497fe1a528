/* Chat templates: a conversation as the prompt text a model was trained on.
 * Without a Jinja engine, the common templates are recognised by their
 * markers and written from a table, the names and outputs those of
 * llama.cpp's built-in list (llama_chat_apply_template), so that a prompt
 * gives the same tokens in both. See glesllm.h. */
#include "glesllm.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "common/error.h"

/* How one role's message is written: pre, the content, post. In pre and
 * post, %r is the role's name and %R the same capitalised; %b is "<s>"
 * except before the conversation's first message. */
typedef struct turn {
    const char *pre, *post;
} turn;

enum {
    TRIM = 1,            /* every content without its leading and trailing space */
    SYS_TO_USER = 2,     /* the system message goes into the next user turn, after
                            its pre, followed by "\n\n" */
    SYS_TRIM = 4,        /* (SYS_TO_USER) that system message trimmed */
    ONLY_KNOWN = 8,      /* roles other than system, user and assistant are left out */
    SYS_FIRST_ONLY = 16, /* a system message after the first is left out */
    MODEL_ROLE = 32,     /* the assistant's role is named "model" */
    INST = 64            /* [INST] turns: see write_inst */
};

typedef struct chat_template {
    const char *name;
    unsigned flags;
    const char *start;          /* before the conversation */
    turn sys, user, assistant; /* the same for every role where only `user` is set */
    bool one_turn;              /* every role is written as `user` */
    const char *gen;            /* what opens the assistant's reply (NULL: nothing) */
} chat_template;

#define ALL(pre, post) .one_turn = true, .user = { pre, post }

static const chat_template templates[] = {
    { "chatml", 0, "", .one_turn = true, .user = { "<|im_start|>%r\n", "<|im_end|>\n" },
      .gen = "<|im_start|>assistant\n" },
    /* [INST] families: see write_inst */
    { "llama2", INST, "", .gen = NULL },
    { "llama2-sys", INST, "", .gen = NULL },
    { "llama2-sys-bos", INST, "", .gen = NULL },
    { "llama2-sys-strip", INST, "", .gen = NULL },
    { "mistral-v1", INST, "", .gen = NULL },
    { "mistral-v3", INST, "", .gen = NULL },
    { "mistral-v3-tekken", INST, "", .gen = NULL },
    { "mistral-v7", 0, "", .sys = { "[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]" },
      .user = { "[INST] ", "[/INST]" }, .assistant = { " ", "</s>" } },
    { "phi3", 0, "", ALL("<|%r|>\n", "<|end|>\n"), .gen = "<|assistant|>\n" },
    { "phi4", 0, "", ALL("<|im_start|>%r<|im_sep|>", "<|im_end|>"),
      .gen = "<|im_start|>assistant<|im_sep|>" },
    { "falcon3", 0, "", ALL("<|%r|>\n", "\n"), .gen = "<|assistant|>\n" },
    { "zephyr", 0, "", ALL("<|%r|>\n", "<|endoftext|>\n"), .gen = "<|assistant|>\n" },
    { "monarch", 0, "", ALL("%b%r\n", "</s>\n"), .gen = "<s>assistant\n" },
    { "gemma", TRIM | SYS_TO_USER | SYS_TRIM | MODEL_ROLE, "",
      ALL("<start_of_turn>%r\n", "<end_of_turn>\n"), .gen = "<start_of_turn>model\n" },
    { "orion", SYS_TO_USER, "", .user = { "Human: ", "\n\nAssistant: </s>" },
      .assistant = { "", "</s>" } },
    { "openchat", 0, "", .sys = { "", "<|end_of_turn|>" },
      .user = { "GPT4 Correct %R: ", "<|end_of_turn|>" },
      .assistant = { "GPT4 Correct %R: ", "<|end_of_turn|>" }, .gen = "GPT4 Correct Assistant:" },
    { "vicuna", ONLY_KNOWN, "", .sys = { "", "\n\n" }, .user = { "USER: ", "\n" },
      .assistant = { "ASSISTANT: ", "</s>\n" }, .gen = "ASSISTANT:" },
    { "vicuna-orca", ONLY_KNOWN, "", .sys = { "SYSTEM: ", "\n" }, .user = { "USER: ", "\n" },
      .assistant = { "ASSISTANT: ", "</s>\n" }, .gen = "ASSISTANT:" },
    { "deepseek", ONLY_KNOWN, "", .sys = { "", "" }, .user = { "### Instruction:\n", "\n" },
      .assistant = { "### Response:\n", "\n<|EOT|>\n" }, .gen = "### Response:\n" },
    { "deepseek2", ONLY_KNOWN, "", .sys = { "", "\n\n" }, .user = { "User: ", "\n\n" },
      .assistant = { "Assistant: ", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" },
      .gen = "Assistant:" },
    { "deepseek3", ONLY_KNOWN, "", .sys = { "", "\n\n" },
      .user = { "<\xef\xbd\x9cUser\xef\xbd\x9c>", "" },
      .assistant = { "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
                     "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" },
      .gen = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>" },
    { "command-r", TRIM | ONLY_KNOWN, "",
      .sys = { "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>" },
      .user = { "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>" },
      .assistant = { "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>" },
      .gen = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" },
    { "llama3", TRIM, "", ALL("<|start_header_id|>%r<|end_header_id|>\n\n", "<|eot_id|>"),
      .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n" },
    { "chatglm3", 0, "[gMASK]sop", ALL("<|%r|>\n ", ""), .gen = "<|assistant|>" },
    { "chatglm4", 0, "[gMASK]<sop>", ALL("<|%r|>\n", ""), .gen = "<|assistant|>" },
    { "glmedge", 0, "", ALL("<|%r|>\n", ""), .gen = "<|assistant|>" },
    { "minicpm", TRIM, "", .sys = { "", "" }, .user = { "<\xe7\x94\xa8\xe6\x88\xb7>", "<AI>" },
      .assistant = { "", "" } },
    { "exaone3", TRIM | ONLY_KNOWN, "", .sys = { "[|system|]", "[|endofturn|]\n" },
      .user = { "[|user|]", "\n" }, .assistant = { "[|assistant|]", "[|endofturn|]\n" },
      .gen = "[|assistant|]" },
    { "rwkv-world", 0, "", .sys = { "", "\n\n" }, .user = { "User: ", "\n\nAssistant:" },
      .assistant = { "", "\n\n" } },
    { "granite", 0, "", ALL("<|start_of_role|>%r<|end_of_role|>", "<|end_of_text|>\n"),
      .gen = "<|start_of_role|>assistant<|end_of_role|>\n" },
    { "gigachat", ONLY_KNOWN | SYS_FIRST_ONLY, "<s>", .sys = { "", "<|message_sep|>" },
      .user = { "user<|role_sep|>", "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>" },
      .assistant = { "assistant<|role_sep|>", "<|message_sep|>" }, .gen = "assistant<|role_sep|>" },
    { "megrez", 0, "", ALL("<|role_start|>%r<|role_end|>", "<|turn_end|>"),
      .gen = "<|role_start|>assistant<|role_end|>" },
};
#define N_TEMPLATES (sizeof templates / sizeof templates[0])

static const chat_template *by_name(const char *name)
{
    for (size_t i = 0; i < N_TEMPLATES; i++)
        if (!strcmp(templates[i].name, name))
            return &templates[i];
    return NULL;
}

size_t glesllm_chat_builtin_templates(const char **names, size_t cap)
{
    for (size_t i = 0; i < N_TEMPLATES && i < cap; i++)
        names[i] = templates[i].name;
    return N_TEMPLATES;
}

static bool has(const char *t, const char *s) { return strstr(t, s) != NULL; }

/* The built-in template a model's Jinja template is, by its markers (in the
 * order llama.cpp tries them: the first that matches wins). */
static const char *detect(const char *t)
{
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? "phi4" : "chatml";
    if (!strncmp(t, "mistral", 7) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]"))
            return "mistral-v7";
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]"))
            return has(t, " [INST]")      ? "mistral-v1"
                   : has(t, "\"[INST]\"") ? "mistral-v3-tekken"
                                          : "mistral-v3";
        return has(t, "content.strip()")              ? "llama2-sys-strip"
               : has(t, "bos_token + '[INST]")        ? "llama2-sys-bos"
               : has(t, "<<SYS>>")                    ? "llama2-sys"
                                                      : "llama2";
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>"))
        return "phi3";
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return has(t, "</s>") ? "falcon3" : "glmedge";
    if (has(t, "<|user|>") && has(t, "<|endoftext|>"))
        return "zephyr";
    if (has(t, "bos_token + message['role']"))
        return "monarch";
    if (has(t, "<start_of_turn>"))
        return "gemma";
    if (has(t, "'\\n\\nAssistant: ' + eos_token"))
        return "orion";
    if (has(t, "GPT4 Correct "))
        return "openchat";
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        return has(t, "SYSTEM: ") ? "vicuna-orca" : "vicuna";
    if (has(t, "### Instruction:") && has(t, "<|EOT|>"))
        return "deepseek";
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>"))
        return "command-r";
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>"))
        return "llama3";
    if (has(t, "[gMASK]sop"))
        return "chatglm3";
    if (has(t, "[gMASK]<sop>"))
        return "chatglm4";
    if (has(t, "<\xe7\x94\xa8\xe6\x88\xb7>"))
        return "minicpm";
    if (has(t, "'Assistant: ' + message['content'] + eos_token"))
        return "deepseek2";
    if (has(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && has(t, "<\xef\xbd\x9cUser\xef\xbd\x9c>") &&
        has(t, "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"))
        return "deepseek3";
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return "exaone3";
    if (has(t, "rwkv-world"))
        return "rwkv-world";
    if (has(t, "<|start_of_role|>"))
        return "granite";
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return "gigachat";
    if (has(t, "<|role_start|>"))
        return "megrez";
    return NULL;
}

const char *glesllm_chat_template_name(const char *tmpl)
{
    if (!tmpl)
        return NULL;
    const chat_template *t = by_name(tmpl);
    return t ? t->name : detect(tmpl);
}

/* ---- writing ---------------------------------------------------------------- */

/* The text so far; what does not fit is counted, not written. */
typedef struct out {
    char *buf;
    size_t size, len;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->len < o->size) {
        size_t k = o->size - o->len < n ? o->size - o->len : n;
        memcpy(o->buf + o->len, s, k);
    }
    o->len += n;
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

static void put_content(out *o, const char *s, bool trim)
{
    size_t n = strlen(s);
    if (trim) {
        while (n && isspace((unsigned char)*s))
            s++, n--;
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
    }
    put(o, s, n);
}

static void put_fmt(out *o, const char *f, const char *role, bool first)
{
    for (; *f; f++) {
        if (f[0] != '%' || !f[1]) {
            put(o, f, 1);
            continue;
        }
        f++;
        if (*f == 'r') {
            puts_(o, role);
        } else if (*f == 'R') {
            char c = (char)toupper((unsigned char)role[0]);
            if (role[0]) {
                put(o, &c, 1);
                puts_(o, role + 1);
            }
        } else if (*f == 'b') {
            if (!first)
                puts_(o, "<s>");
        }
    }
}

/* The [INST] families: a turn opens with [INST] before its first message
 * and closes after the assistant's reply. */
static void write_inst(out *o, const chat_template *t, const glesllm_chat_message *m, size_t n)
{
    const char *name = t->name;
    if (!strncmp(name, "mistral", 7)) {
        bool v1 = !strcmp(name, "mistral-v1"), tekken = !strcmp(name, "mistral-v3-tekken");
        bool trim_reply = !strcmp(name, "mistral-v3");
        const char *lead = v1 ? " " : "", *trail = tekken ? "" : " ";
        bool open = false;
        for (size_t i = 0; i < n; i++) {
            if (!open) {
                puts_(o, lead);
                puts_(o, "[INST]");
                puts_(o, trail);
                open = true;
            }
            if (!strcmp(m[i].role, "system")) {
                puts_(o, m[i].content);
                puts_(o, "\n\n");
            } else if (!strcmp(m[i].role, "user")) {
                puts_(o, m[i].content);
                puts_(o, lead);
                puts_(o, "[/INST]");
            } else {
                puts_(o, trail);
                put_content(o, m[i].content, trim_reply);
                puts_(o, "</s>");
                open = false;
            }
        }
        return;
    }
    bool sys = strcmp(name, "llama2") != 0, bos = !strcmp(name, "llama2-sys-bos");
    bool strip = !strcmp(name, "llama2-sys-strip");
    puts_(o, "[INST] ");
    bool open = true;
    for (size_t i = 0; i < n; i++) {
        if (!open) {
            puts_(o, bos ? "<s>[INST] " : "[INST] ");
            open = true;
        }
        if (!strcmp(m[i].role, "system")) {
            puts_(o, sys ? "<<SYS>>\n" : "");
            put_content(o, m[i].content, strip);
            puts_(o, sys ? "\n<</SYS>>\n\n" : "\n");
        } else if (!strcmp(m[i].role, "user")) {
            put_content(o, m[i].content, strip);
            puts_(o, " [/INST]");
        } else {
            put_content(o, m[i].content, strip);
            puts_(o, "</s>");
            open = false;
        }
    }
}

glesllm_status glesllm_chat_apply(const char *tmpl, const glesllm_chat_message *msgs, size_t n,
                                  int add_assistant, char *buf, size_t size, size_t *len)
{
    if (!tmpl || (n && !msgs) || (size && !buf) || !len)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "chat: no template, messages or buffer");
    const char *name = glesllm_chat_template_name(tmpl);
    const chat_template *t = name ? by_name(name) : NULL;
    if (!t)
        return err_set(GLESLLM_ERR_UNSUPPORTED,
                       "the chat template is none of the built-in ones (a Jinja template "
                       "glesllm does not recognise): name one of them (--chat-template)");
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "chat: message %zu has no %s", i,
                           msgs[i].role ? "content" : "role");
    out o = { buf, size, 0 };
    puts_(&o, t->start);
    if (t->flags & INST) {
        write_inst(&o, t, msgs, n);
    } else {
        const char *held = NULL; /* SYS_TO_USER: the system message not yet written */
        bool trim = t->flags & TRIM;
        for (size_t i = 0; i < n; i++) {
            const char *role = msgs[i].role;
            bool is_sys = !strcmp(role, "system"), is_user = !strcmp(role, "user");
            bool is_asst = !strcmp(role, "assistant");
            if (is_sys && (t->flags & SYS_TO_USER)) {
                held = msgs[i].content;
                continue;
            }
            if ((t->flags & ONLY_KNOWN) && !is_sys && !is_user && !is_asst)
                continue;
            if (is_sys && (t->flags & SYS_FIRST_ONLY) && i)
                continue;
            /* another role (tool, developer) is written as the assistant's */
            const turn *tu = t->one_turn || is_user ? &t->user
                             : is_sys && t->sys.pre  ? &t->sys
                                                     : &t->assistant;
            if (is_asst && (t->flags & MODEL_ROLE))
                role = "model";
            put_fmt(&o, tu->pre, role, i == 0);
            if (held && !is_asst && tu == &t->user) {
                put_content(&o, held, t->flags & SYS_TRIM);
                puts_(&o, "\n\n");
                held = NULL;
            }
            put_content(&o, msgs[i].content, trim);
            put_fmt(&o, tu->post, role, i == 0);
        }
    }
    if (add_assistant && t->gen)
        puts_(&o, t->gen);
    *len = o.len;
    if (o.len >= size) {
        if (size)
            buf[size - 1] = '\0';
        return GLESLLM_ERR_SMALL_BUFFER;
    }
    buf[o.len] = '\0';
    return GLESLLM_OK;
}
