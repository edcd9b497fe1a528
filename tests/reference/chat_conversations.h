/* The conversations test_chat formats through every built-in template, and
 * llama_chat_reference.c through llama.cpp's (shared so that both format
 * the same messages): a system prompt and two turns with spaces to trim,
 * a lone user message, and a tool message with multi-byte UTF-8. */
#ifndef GLESLLM_CHAT_CONVERSATIONS_H
#define GLESLLM_CHAT_CONVERSATIONS_H

typedef struct chat_turn {
    const char *role, *content;
} chat_turn;

static const chat_turn chat_conv0[] = {
    { "system", "You are a helpful assistant" },
    { "user", "Hello" },
    { "assistant", "  Hi there, how can I help?  " },
    { "user", " Who are you\n" },
};
static const chat_turn chat_conv1[] = { { "user", "  What is 2+2? " } };
static const chat_turn chat_conv2[] = {
    { "user", "Wie warm ist es in Z\xc3\xbcrich? \xe4\xb8\x96\xe7\x95\x8c" },
    { "assistant", "Let me look." },
    { "tool", "{\"temp\": 21}" },
    { "system", "Answer briefly." },
};
static const struct {
    const chat_turn *turns;
    int n;
} chat_convs[] = { { chat_conv0, 4 }, { chat_conv1, 1 }, { chat_conv2, 4 } };
#define CHAT_N_CONVS 3

/* Jinja templates (fragments with the markers models' templates carry) and
 * the built-in template each is recognised as. */
static const char *const chat_jinja[] = {
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>'}}{% endfor %}",
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}",
    "{% if messages[0]['role'] == 'system' %}{{ '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' }}{% endif %}[INST]",
    "{{ bos_token + '[INST] ' }}<<SYS>>{{ message['content'].strip() }}",
    "{{ bos_token + '[INST] ' }}<<SYS>>{{ message['content'] }}",
    "{{ ' [INST] ' + system_message }}",
    "{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{{ '[INST] ' + message['content'] }}",
    "{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{{ \"[INST]\" + message['content'] }}",
    "[SYSTEM_PROMPT]{{ system }}[/SYSTEM_PROMPT][INST]",
    "{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>' + '\\n'}}<|assistant|>",
    "<|system|>{{ '<|user|>' }}<|assistant|></s>",
    "<|system|>{{ '<|user|>' }}<|assistant|>",
    "{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}",
    "{{ bos_token + message['role'] + '\\n' + message['content'] + eos_token }}",
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
    "{{ 'Human: ' + content + '\\n\\nAssistant: ' + eos_token }}",
    "{{ 'GPT4 Correct ' + message['role'].title() + ': ' + content + '<|end_of_turn|>'}}",
    "{{ 'USER: ' + content }}{{ 'ASSISTANT: ' + content }}",
    "{{ 'SYSTEM: ' + content }}{{ 'USER: ' + content }}{{ 'ASSISTANT: ' + content }}",
    "{{ '### Instruction:\\n' + content }}{{ '<|EOT|>' }}",
    "{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content }}",
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + content | trim + '<|eot_id|>' }}",
    "[gMASK]sop{% for item in messages %}",
    "[gMASK]<sop>{% for item in messages %}",
    "{{ '<\xe7\x94\xa8\xe6\x88\xb7>' + content + '<AI>' }}",
    "{{ 'Assistant: ' + message['content'] + eos_token }}",
    "<\xef\xbd\x9cUser\xef\xbd\x9c><\xef\xbd\x9c" "Assistant\xef\xbd\x9c><\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[|system|]{{ c }}[|endofturn|][|user|][|assistant|]",
    "rwkv-world",
    "<|start_of_role|>{{ role }}<|end_of_role|>",
    "{{ message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1] }}",
    "<|role_start|>{{ role }}<|role_end|>",
    "{{ 'no markers a built-in template has' }}",
};
#define CHAT_N_JINJA (sizeof chat_jinja / sizeof chat_jinja[0])

#endif
