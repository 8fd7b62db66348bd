/* Real chat templates of several model families (written from memory) and the qwen3 fixture template
 * on its tool-call and multi-turn reasoning paths; expected texts derived by hand. Also the CLI. */
#include "verlc/chat_template.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *render(const char *tmpl, const char *bos, const char *eos, const char *msgs, const char *tools, int gen) {
    vc_chat_template *t = NULL;
    cJSON *m = cJSON_Parse(msgs), *tl = tools ? cJSON_Parse(tools) : NULL;
    vc_chat_opts o = { .add_generation_prompt = gen, .enable_thinking = -1, .tools = tl };
    char *out = NULL;
    vc_status st = vc_chat_template_from_string(tmpl, bos, eos, &t);
    if (!st) st = vc_chat_template_render(t, m, &o, &out);
    if (st) { out = malloc(strlen(vc_last_error()) + 5); strcpy(out, "ERR:"); strcat(out, vc_last_error()); }
    vc_chat_template_free(t);
    cJSON_Delete(m);
    cJSON_Delete(tl);
    return out;
}

#define SAME(got, want) do { char *_g = (got); CHECK_MSG(!strcmp(_g, want), "\n  got: [%s]\n want: [%s]", _g, want); free(_g); } while (0)
#define FAILS(got, part) do { char *_g = (got); CHECK_MSG(!strncmp(_g, "ERR:", 4) && strstr(_g, part), "got [%s]", _g); free(_g); } while (0)

static const char *MISTRAL =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

static const char *GEMMA =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

static const char *PHI3 =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

static const char *LLAMA2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

static const char *GLM4 =
    "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined %}<|system|>\ntools{% endif %}"
    "{% if item['role'] == 'user' %}<|user|>\n{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n"
    "{{ item['content'] }}{% elif item['role'] == 'system' %}<|system|>\n{{ item['content'] }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

static const char *INTERNLM2 =
    "{{ bos_token }}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

static const char *QWEN25 =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

/* Llama 3.1's template (system/date/tools-in-user-message logic; tool-call turns reduced) */
static const char *LLAMA31 =
    "{{- bos_token }}\n"
    "{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n"
    "{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n"
    "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
    "{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n"
    "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n"
    "{#- System message + builtin tools #}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n"
    "{%- if builtin_tools is defined %}\n"
    "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n{%- endif %}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{{- system_message }}\n"
    "{{- \"<|eot_id|>\" }}\n\n"
    "{#- Custom tools are passed in a user message with some extra guidance #}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {#- Extract the first user message so we can plug it in here #}\n"
    "    {%- if messages | length != 0 %}\n"
    "        {%- set first_user_message = messages[0]['content']|trim %}\n"
    "        {%- set messages = messages[1:] %}\n"
    "    {%- else %}\n"
    "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n"
    "{%- endif %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
    "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n"
    "    {{- first_user_message + \"<|eot_id|>\"}}\n"
    "{%- endif %}\n\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
    "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
    "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n"
    "        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n"
    "        {{- \"<|eot_id|>\" }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n";

static void test_families(void) {
    const char *uau = "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello\"},{\"role\":\"user\",\"content\":\"Bye\"}]";
    SAME(render(MISTRAL, "<s>", "</s>", uau, NULL, 0), "<s>[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
    FAILS(render(MISTRAL, "<s>", "</s>", "[{\"role\":\"assistant\",\"content\":\"x\"}]", NULL, 0), "Conversation roles must alternate");
    SAME(render(GEMMA, "<bos>", "<eos>", "[{\"role\":\"user\",\"content\":\" Hi \"},{\"role\":\"assistant\",\"content\":\"Hello\"}]", NULL, 1),
         "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n<start_of_turn>model\n");
    FAILS(render(GEMMA, "<bos>", "<eos>", "[{\"role\":\"system\",\"content\":\"S\"}]", NULL, 1), "System role not supported");
    SAME(render(PHI3, "<s>", "<|endoftext|>", "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 0), "<|user|>\nHi<|end|>\n<|endoftext|>");
    SAME(render(PHI3, "<s>", "<|endoftext|>", "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1),
         "<|system|>\nS<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
    SAME(render(LLAMA2, "<s>", "</s>", "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\" U \"},"
                "{\"role\":\"assistant\",\"content\":\"A\"},{\"role\":\"user\",\"content\":\"U2\"}]", NULL, 0),
         "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n U [/INST] A </s><s>[INST] U2 [/INST]");
    SAME(render(GLM4, NULL, NULL, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"}]", NULL, 1),
         "[gMASK]<sop><|system|>\nS<|user|>\nU<|assistant|>");
    SAME(render(INTERNLM2, "<s>", "</s>", "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1),
         "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

static void test_qwen25(void) {
    SAME(render(QWEN25, NULL, "<|im_end|>", "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1),
         "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]";
    const char *msgs = "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
                       "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]},"
                       "{\"role\":\"tool\",\"content\":\"r1\"},{\"role\":\"tool\",\"content\":\"r2\"}]";
    SAME(render(QWEN25, NULL, "<|im_end|>", msgs, tools, 1),
         "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
         "You may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
         "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}\n</tools>\n\n"
         "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
         "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
         "<|im_start|>user\nGo<|im_end|>\n"
         "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>\n"
         "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n"
         "<|im_start|>assistant\n");
}

static void test_llama31(void) {
    SAME(render(LLAMA31, "<|begin_of_text|>", "<|eot_id|>",
                "[{\"role\":\"system\",\"content\":\"You are X. \"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1),
         "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
         "Today Date: 26 Jul 2024\n\nYou are X.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n");
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
    SAME(render(LLAMA31, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\":\"user\",\"content\":\"Weather?\"},"
                "{\"role\":\"tool\",\"content\":{\"t\":20}}]", tools, 1),
         "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
         "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call "
         "with its proper arguments that best answers the given prompt.\n\n"
         "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}."
         "Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"f\",\n"
         "        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}\n\n"
         "Weather?<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{\"t\": 20}<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n");
    FAILS(render(LLAMA31, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\":\"system\",\"content\":\"S\"}]", tools, 1),
          "no first user message");
}

static void test_qwen3_paths(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    vc_chat_template *t = NULL;
    CHECK_OK(vc_chat_template_load(dir, &t));
    if (!t) return;
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get weather\","
                               "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]");
    cJSON *msgs = cJSON_Parse("[{\"role\":\"system\",\"content\":\"Sys.\"},{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Need tool.\",\"tool_calls\":[{\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"{\\\"temp\\\": 20}\"},"
        "{\"role\":\"assistant\",\"content\":\"<think>\\nIt is 20.\\n</think>\\n\\nIt is 20 C.\"}]");
    vc_chat_opts o = { .enable_thinking = -1, .tools = tools };
    char *out = NULL;
    CHECK_OK(vc_chat_template_render(t, msgs, &o, &out));
    SAME(out ? out : strdup(""),
         "<|im_start|>system\nSys.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
         "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": "
         "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\n\n"
         "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
         "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
         "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
         "<|im_start|>assistant\n<think>\nNeed tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
         "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
         "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n"
         "<|im_start|>assistant\n<think>\nIt is 20.\n</think>\n\nIt is 20 C.<|im_end|>\n");
    cJSON_Delete(msgs);
    /* reasoning of turns before the last user query is dropped */
    msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"A\"},{\"role\":\"assistant\",\"content\":\"<think>\\nr1\\n</think>\\n\\nans1\"},"
                       "{\"role\":\"user\",\"content\":\"B\"}]");
    vc_chat_opts o2 = { .add_generation_prompt = 1, .enable_thinking = 1 };
    CHECK_OK(vc_chat_template_render(t, msgs, &o2, &out));
    SAME(out ? out : strdup(""),
         "<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\nans1<|im_end|>\n<|im_start|>user\nB<|im_end|>\n<|im_start|>assistant\n");
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    vc_chat_template_free(t);
}

static void test_load_errors(void) {
    vc_chat_template *t = (vc_chat_template *)1;
    CHECK(vc_chat_template_load("/nonexistent/dir", &t) == VC_ERR_IO && t == NULL);
    char dir[] = "/tmp/verlc_chat_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    const char *cfg = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": "
                      "\"{{ bos_token }}D\"}], \"bos_token\": {\"content\": \"<B>\"}}";
    CHECK_OK(vc_write_file_atomic(path, cfg, strlen(cfg)));
    CHECK_OK(vc_chat_template_load(dir, &t));
    cJSON *m = cJSON_Parse("[]");
    char *out = NULL;
    if (t) CHECK_OK(vc_chat_template_render(t, m, NULL, &out));
    CHECK(out && !strcmp(out, "<B>D"));
    free(out);
    vc_chat_template_free(t);
    cfg = "{\"chat_template\": \"{% if x %}\"}";
    CHECK_OK(vc_write_file_atomic(path, cfg, strlen(cfg)));
    CHECK(vc_chat_template_load(dir, &t) == VC_ERR_FORMAT && strstr(vc_last_error(), "tokenizer_config.json"));
    cfg = "{\"bos_token\": \"<s>\"}";
    CHECK_OK(vc_write_file_atomic(path, cfg, strlen(cfg)));
    CHECK(vc_chat_template_load(dir, &t) == VC_ERR_MISSING && strstr(vc_last_error(), "no chat template"));
    /* a processor's chat_template.json (image-text checkpoints) when the tokenizer has none */
    char ppath[256];
    snprintf(ppath, sizeof ppath, "%s/chat_template.json", dir);
    const char *proc = "{\"chat_template\": \"{{ bos_token }}P{{ messages | length }}\"}";
    CHECK_OK(vc_write_file_atomic(ppath, proc, strlen(proc)));
    t = NULL;
    CHECK_OK(vc_chat_template_load(dir, &t));
    out = NULL;
    if (t) CHECK_OK(vc_chat_template_render(t, m, NULL, &out));
    CHECK_MSG(out && !strcmp(out, "<s>P0"), "chat_template.json rendered '%s'", out ? out : "");
    free(out);
    vc_chat_template_free(t);
    proc = "{\"chat_template\": 7}";
    CHECK_OK(vc_write_file_atomic(ppath, proc, strlen(proc)));
    CHECK(vc_chat_template_load(dir, &t) == VC_ERR_FORMAT && strstr(vc_last_error(), "chat_template.json"));
    remove(ppath);
    /* chat_template.jinja beside it is the template (as transformers loads it), the config still gives bos */
    char jpath[256];
    snprintf(jpath, sizeof jpath, "%s/chat_template.jinja", dir);
    const char *jinja = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}\n";
    CHECK_OK(vc_write_file_atomic(jpath, jinja, strlen(jinja)));
    cJSON *one = cJSON_Parse("[{\"role\": \"user\", \"content\": \"hi\"}]");
    t = NULL;
    CHECK_OK(vc_chat_template_load(dir, &t));
    out = NULL;
    if (t) CHECK_OK(vc_chat_template_render(t, one, NULL, &out));
    /* Jinja drops the source's one trailing newline (keep_trailing_newline is off in transformers) */
    CHECK_MSG(out && !strcmp(out, "<s>[user]"), "chat_template.jinja rendered '%s'", out ? out : "");
    free(out);
    vc_chat_template_free(t);
    remove(path); /* the template file alone */
    t = NULL;
    CHECK_OK(vc_chat_template_load(dir, &t));
    vc_chat_template_free(t);
    jinja = "{% for m in messages %}";
    CHECK_OK(vc_write_file_atomic(jpath, jinja, strlen(jinja)));
    CHECK(vc_chat_template_load(dir, &t) == VC_ERR_FORMAT && strstr(vc_last_error(), "chat_template.jinja"));
    cJSON_Delete(one);
    cJSON_Delete(m);
    remove(jpath);
    remove(path);
    remove(dir);
}

static void test_cli(void) {
    const char *bin = getenv("VERLC_BIN");
    if (!bin || !*bin) { printf("VERLC_BIN not set: CLI test skipped\n"); return; }
    char cmd[2048], outp[] = "/tmp/verlc_chat_out_XXXXXX";
    int fd = mkstemp(outp);
    if (fd < 0) return;
    close(fd);
    snprintf(cmd, sizeof cmd, "printf '%%s' '[{\"role\":\"user\",\"content\":\"What is 2+3?\"}]' | %s chat-template --tokenizer "
             "%s/fixtures/tokenizers/qwen3 --add-generation-prompt --no-thinking > %s", bin, vc_test_shared(), outp);
    CHECK(system(cmd) == 0);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file(outp, &text, &len));
    CHECK(text && !strcmp(text, "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(text);
    snprintf(cmd, sizeof cmd, "echo '[]' | %s chat-template --tokenizer %s/fixtures/tokenizers/llama2 2> %s", bin, vc_test_shared(), outp);
    int rc = system(cmd);
    CHECK(rc != 0 && WEXITSTATUS(rc) == 1);
    CHECK_OK(vc_read_file(outp, &text, &len));
    CHECK(text && !strncmp(text, "verlc: ", 7) && strstr(text, "no chat template") && strchr(text, '\n') == text + len - 1);
    free(text);
    unlink(outp);
}

/* one template rendered from several threads at once gives identical text */
#include <pthread.h>
static vc_chat_template *g_tmpl;
static void *render_many(void *arg) {
    cJSON *m = cJSON_Parse("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"}]");
    vc_chat_opts o = { .add_generation_prompt = 1, .enable_thinking = -1 };
    int *bad = arg;
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        if (vc_chat_template_render(g_tmpl, m, &o, &out) || strcmp(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n")) (*bad)++;
        free(out);
    }
    cJSON_Delete(m);
    return NULL;
}
static void test_threads(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    CHECK_OK(vc_chat_template_load(dir, &g_tmpl));
    if (!g_tmpl) return;
    pthread_t th[4];
    int bad[4] = { 0 };
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, render_many, &bad[i]);
    for (int i = 0; i < 4; i++) { pthread_join(th[i], NULL); CHECK(bad[i] == 0); }
    vc_chat_template_free(g_tmpl);
}

int main(void) {
    test_threads();
    test_families();
    test_qwen25();
    test_llama31();
    test_qwen3_paths();
    test_load_errors();
    test_cli();
    return vc_test_done();
}
