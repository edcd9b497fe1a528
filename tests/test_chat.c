/* Chat templates: every built-in template on three conversations, with and
 * without the assistant's opening, and the recognition of models' Jinja
 * templates by their markers, against llama.cpp's llama_chat_apply_template
 * on the same messages (tests/reference/llama-chat.jsonl, written by
 * tests/reference/llama_chat_reference.c). No GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glesllm.h"
#include "reference/chat_conversations.h"
#include "reference_jsonl.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

#define TEXT_MAX 8192

static glesllm_status apply(const char *tmpl, int conv, int add, char *buf, size_t size,
                            size_t *len)
{
    glesllm_chat_message msgs[8];
    for (int i = 0; i < chat_convs[conv].n; i++) {
        msgs[i].role = chat_convs[conv].turns[i].role;
        msgs[i].content = chat_convs[conv].turns[i].content;
    }
    return glesllm_chat_apply(tmpl, msgs, (size_t)chat_convs[conv].n, add, buf, size, len);
}

/* Each line of the reference: the same text from glesllm_chat_apply. */
static void test_matches_llama_cpp(void)
{
    FILE *f = fopen(GLESLLM_TEST_DATA_DIR "/reference/llama-chat.jsonl", "r");
    TEST_ASSERT_NOT_NULL_MESSAGE(f, "tests/reference/llama-chat.jsonl is missing");
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, names_seen = 0;
    static char want[TEXT_MAX], got[TEXT_MAX], key[64], msg[256];
    while (getline(&line, &cap, f) > 0) {
        ref_string(line, "template", key, sizeof key);
        const char *c = strstr(line, "\"conv\": ");
        int conv = c ? atoi(c + 8) : -1;
        int add = (int)(strstr(line, "\"add\": 1") != NULL);
        TEST_ASSERT_TRUE(conv >= 0 && conv < CHAT_N_CONVS);
        const char *tmpl = key;
        if (!strncmp(key, "jinja", 5)) {
            size_t j = (size_t)atoi(key + 5);
            TEST_ASSERT_TRUE(j < CHAT_N_JINJA);
            tmpl = chat_jinja[j];
        } else {
            TEST_ASSERT_EQUAL_STRING(key, glesllm_chat_template_name(key));
            names_seen++;
        }
        size_t len = 0;
        glesllm_status st = apply(tmpl, conv, add, got, sizeof got, &len);
        snprintf(msg, sizeof msg, "template %s, conversation %d, add_assistant %d", key, conv, add);
        if (strstr(line, "\"unsupported\"")) {
            TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_ERR_UNSUPPORTED, st, msg);
            TEST_ASSERT_NULL_MESSAGE(glesllm_chat_template_name(tmpl), msg);
        } else {
            ref_string(line, "text", want, sizeof want);
            TEST_ASSERT_EQUAL_MESSAGE(GLESLLM_OK, st, msg);
            TEST_ASSERT_EQUAL_STRING_MESSAGE(want, got, msg);
            TEST_ASSERT_EQUAL_MESSAGE(strlen(want), len, msg);
        }
        lines++;
    }
    free(line);
    fclose(f);
    const char *names[64];
    size_t n_names = glesllm_chat_builtin_templates(names, 64);
    /* every built-in name of llama.cpp's list, each conversation, both ways */
    TEST_ASSERT_EQUAL((int)n_names * CHAT_N_CONVS * 2, names_seen);
    TEST_ASSERT_EQUAL(names_seen + (int)CHAT_N_JINJA, lines);
}

/* A buffer too small: the length needed, and a NUL-terminated prefix. */
static void test_small_buffer(void)
{
    char full[TEXT_MAX], small[16];
    size_t len = 0, need = 0;
    TEST_ASSERT_EQUAL(GLESLLM_OK, apply("chatml", 0, 1, full, sizeof full, &len));
    TEST_ASSERT_EQUAL(GLESLLM_ERR_SMALL_BUFFER, apply("chatml", 0, 1, small, sizeof small, &need));
    TEST_ASSERT_EQUAL(len, need);
    TEST_ASSERT_EQUAL(sizeof small - 1, strlen(small));
    TEST_ASSERT_EQUAL(0, strncmp(full, small, sizeof small - 1));
    /* exactly the length: no room for the NUL */
    TEST_ASSERT_EQUAL(GLESLLM_ERR_SMALL_BUFFER, apply("chatml", 0, 1, full, len, &need));
    TEST_ASSERT_EQUAL(GLESLLM_ERR_SMALL_BUFFER, apply("chatml", 0, 1, NULL, 0, &need));
    TEST_ASSERT_EQUAL(len, need);
}

static void test_bad_arguments(void)
{
    char buf[256];
    size_t len;
    glesllm_chat_message no_content = { "user", NULL };
    TEST_ASSERT_EQUAL(GLESLLM_ERR_INVALID_ARGUMENT,
                      glesllm_chat_apply("chatml", &no_content, 1, 1, buf, sizeof buf, &len));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "no content"));
    TEST_ASSERT_EQUAL(GLESLLM_ERR_INVALID_ARGUMENT,
                      glesllm_chat_apply(NULL, &no_content, 1, 1, buf, sizeof buf, &len));
    TEST_ASSERT_EQUAL(GLESLLM_ERR_UNSUPPORTED, apply("not-a-template", 1, 1, buf, sizeof buf, &len));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "--chat-template"));
    /* no messages: only the opening */
    TEST_ASSERT_EQUAL(GLESLLM_OK, glesllm_chat_apply("llama3", NULL, 0, 1, buf, sizeof buf, &len));
    TEST_ASSERT_EQUAL_STRING("<|start_header_id|>assistant<|end_header_id|>\n\n", buf);
    TEST_ASSERT_NULL(glesllm_chat_template_name(NULL));
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_matches_llama_cpp);
    RUN_TEST(test_small_buffer);
    RUN_TEST(test_bad_arguments);
    return UNITY_END();
}
