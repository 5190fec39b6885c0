"""Generate fixtures/chat/*.json: real chat templates rendered by jinja2, the oracle for plumb's ChatTemplate.

    python3 tools/reference/make_chat_template_fixtures.py [--out DIR]    # default DIR: <repo>/fixtures/chat
    python3 tools/reference/make_chat_template_fixtures.py --check        # regenerate, compare, exit 1 on a diff
    ... --gguf models/SmolLM2-135M-Instruct.Q4_1.gguf                      # also check SmolLM2's text (needs gguf)

Needs jinja2==3.1.6 (the version pinned here; `python3 -m venv V && V/bin/pip install jinja2==3.1.6`).

plumb has no Jinja interpreter: it recognises a template's style and renders it in C++. This script renders
the real template texts the way Hugging Face transformers does (apply_chat_template: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension, and a
raise_exception global) over a fixed set of conversations, and writes one JSON file per template:

  name, source               which model the template comes from, and where its text was taken from
  template                   the template text, exactly (what GGUF tokenizer.chat_template would hold)
  bos_token, eos_token       what the template's bos_token/eos_token expand to
  style                      the plumb style that must be detected ("chatml", ...), or null: plumb must
                             refuse the template (then "refusal" says why, and there are no cases)
  default_system_prompt      derived by rendering a lone user message: the system text the template inserts
  prefix_property            whether render(conv ending with an assistant turn) is a prefix of
                             render(conv + user turn, add_generation_prompt) for every such conversation
  tool_format                "qwen2.5" or "qwen3" where the template defines tool use (plumb's
                             ToolFormat), else null
  tool_cases[]               only with a tool_format: name, tools (the `tools` variable, or null),
                             messages (with tool_calls and role "tool"), add_generation_prompt, rendered
  cases[]                    name, messages, add_generation_prompt, plumb_accepts, and then
                               plumb_accepts: rendered (plumb must produce exactly this text), and for
                                              gemma3 contents (the message texts as placed in it)
                               otherwise:     jinja_error (the real template's exception text, which plumb's
                                              error must contain) or, where the real template renders the
                                              conversation anyway, jinja_rendered (plumb is stricter), or
                                              jinja_failure where it fails without raise_exception

plumb_accepts is plumb's rule (plumb_accepts below, the same rule as src/tokenizer/chat_template_render.cpp);
the script refuses to write fixtures if plumb would accept a conversation the real template rejects.
"""

import argparse
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

JINJA2_VERSION = "3.1.6"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = "tools/reference/make_chat_template_fixtures.py"


def from_json(body):
    """Template texts below are written as the JSON string value of tokenizer_config.json's chat_template
    (escapes and all), so they can be compared with the published files character for character."""
    return json.loads('"' + body + '"')


# --- the templates ---------------------------------------------------------------------------------------
# Each: (name, style or None, refusal or None, bos, eos, source, text).

SMOLLM2 = from_json(
    r"""{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"""
)

QWEN2 = from_json(
    r"""{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"""
)

# Newlines written as Jinja escapes ('\n' inside the Jinja string), unlike SmolLM2's literal newlines.
OPENHERMES = from_json(
    r"""{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"""
)

QWEN25 = from_json(
    r"""{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"""
)

LLAMA3 = from_json(
    r"""{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"""
)

LLAMA2 = from_json(
    r"""{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"""
)

GEMMA = from_json(
    r"""{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"""
)

GEMMA3 = from_json(
    r"""{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- else -%}\n        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n    {%- endif -%}\n    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n"""
)

LLAMA32 = from_json(
    r"""{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n{%- if not date_string is defined %}\n    {%- if strftime_now is defined %}\n        {%- set date_string = strftime_now(\"%d %b %Y\") %}\n    {%- else %}\n        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n{#- This block extracts the system message, so we can slot it into the right place. #}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n{#- System message #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n{#- Custom tools are passed in a user message with some extra guidance #}\n{%- if tools_in_user_message and not tools is none %}\n    {#- Extract the first user message so we can plug it in here #}\n    {%- if messages | length != 0 %}\n        {%- set first_user_message = messages[0]['content']|trim %}\n        {%- set messages = messages[1:] %}\n    {%- else %}\n        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n{%- endif %}\n    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n        {%- endif %}\n        {%- set tool_call = message.tool_calls[0].function %}\n        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n        {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n        {{- '\"parameters\": ' }}\n        {{- tool_call.arguments | tojson }}\n        {{- \"}\" }}\n        {{- \"<|eot_id|>\" }}\n    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"""
)

MISTRAL = from_json(
    r"""{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"""
)

VICUNA = from_json(
    r"""{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + message['content'] + '\n\n' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}{{-'ASSISTANT:'-}}{%- endif -%}"""
)

# Newlines real inside the Jinja strings, as in the .jinja file (tokenizer_config.json decoded).
PHI35 = from_json(
    r"""{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"""
)

PHI4_MINI = from_json(
    r"""{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"""
)

# The Tulu 3 format; note the two spaces before + in the assistant branches (as published).
OLMO2 = from_json(
    r"""{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}"""
)

# The first Qwen3 release; QWEN3_8B is the later revision (content is string checks, reasoning split
# from `content`), which renders the same for string contents.
QWEN3_0_6B = from_json(
    r"""{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n        {{- messages[0].content + '\\n\\n' }}\n    {%- endif %}\n    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n{%- for message in messages[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n    {%- if ns.multi_step_tool and message.role == \"user\" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n        {%- set ns.multi_step_tool = false %}\n        {%- set ns.last_query_index = index %}\n    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {%- set content = message.content %}\n        {%- set reasoning_content = '' %}\n        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}\n            {%- set reasoning_content = message.reasoning_content %}\n        {%- else %}\n            {%- if '</think>' in message.content %}\n                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}\n                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n            {%- endif %}\n        {%- endif %}\n        {%- if loop.index0 > ns.last_query_index %}\n            {%- if loop.last or (not loop.last and reasoning_content) %}\n                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n            {%- else %}\n                {{- '<|im_start|>' + message.role + '\\n' + content }}\n            {%- endif %}\n        {%- else %}\n            {{- '<|im_start|>' + message.role + '\\n' + content }}\n        {%- endif %}\n        {%- if message.tool_calls %}\n            {%- for tool_call in message.tool_calls %}\n                {%- if (loop.first and content) or (not loop.first) %}\n                    {{- '\\n' }}\n                {%- endif %}\n                {%- if tool_call.function %}\n                    {%- set tool_call = tool_call.function %}\n                {%- endif %}\n                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_call.name }}\n                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments is string %}\n                    {{- tool_call.arguments }}\n                {%- else %}\n                    {{- tool_call.arguments | tojson }}\n                {%- endif %}\n                {{- '}\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"""
)

QWEN3_8B = from_json(
    r"""{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n        {{- messages[0].content + '\\n\\n' }}\n    {%- endif %}\n    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n{%- for message in messages[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n    {%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n        {%- set ns.multi_step_tool = false %}\n        {%- set ns.last_query_index = index %}\n    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n    {%- if message.content is string %}\n        {%- set content = message.content %}\n    {%- else %}\n        {%- set content = '' %}\n    {%- endif %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {%- set reasoning_content = '' %}\n        {%- if message.reasoning_content is string %}\n            {%- set reasoning_content = message.reasoning_content %}\n        {%- else %}\n            {%- if '</think>' in content %}\n                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n            {%- endif %}\n        {%- endif %}\n        {%- if loop.index0 > ns.last_query_index %}\n            {%- if loop.last or (not loop.last and reasoning_content) %}\n                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n            {%- else %}\n                {{- '<|im_start|>' + message.role + '\\n' + content }}\n            {%- endif %}\n        {%- else %}\n            {{- '<|im_start|>' + message.role + '\\n' + content }}\n        {%- endif %}\n        {%- if message.tool_calls %}\n            {%- for tool_call in message.tool_calls %}\n                {%- if (loop.first and content) or (not loop.first) %}\n                    {{- '\\n' }}\n                {%- endif %}\n                {%- if tool_call.function %}\n                    {%- set tool_call = tool_call.function %}\n                {%- endif %}\n                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_call.name }}\n                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments is string %}\n                    {{- tool_call.arguments }}\n                {%- else %}\n                    {{- tool_call.arguments | tojson }}\n                {%- endif %}\n                {{- '}\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"""
)

# Mistral's later template ("v1": a system message folded into the first turn, ' [INST] ' with a space).
MISTRAL_V1 = from_json(
    r"""{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n"""
)

TEMPLATES = [
    ("smollm2-135m-instruct", "chatml", None, "<|im_start|>", "<|im_end|>",
     "HuggingFaceTB/SmolLM2-135M-Instruct: GGUF tokenizer.chat_template of "
     "models/SmolLM2-135M-Instruct.Q4_1.gguf (checked with --gguf)", SMOLLM2),
    ("qwen2-instruct", "chatml", None, "", "<|im_end|>",
     "Qwen/Qwen2-7B-Instruct tokenizer_config.json chat_template, as quoted verbatim by several public "
     "repositories (found with code search)", QWEN2),
    ("qwen2.5-instruct", "chatml", None, "", "<|im_end|>",
     "Qwen/Qwen2.5-0.5B-Instruct tokenizer_config.json chat_template, transcribed from the copy in a "
     "public Swift Jinja test suite (not from the Hugging Face file itself)", QWEN25),
    ("openhermes-2.5-mistral", "chatml", None, "<s>", "<|im_end|>",
     "teknium/OpenHermes-2.5-Mistral-7B, as in llama.cpp tests/test-chat-template.cpp (newlines as Jinja "
     "escapes)", OPENHERMES),
    ("llama3-instruct", "llama3", None, "<|begin_of_text|>", "<|eot_id|>",
     "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template (revision with "
     "add_generation_prompt), as quoted verbatim by several public repositories", LLAMA3),
    ("llama2-chat", "llama2", None, "<s>", "</s>",
     "meta-llama/Llama-2-7b-chat-hf (and -13b) tokenizer_config.json chat_template, as quoted verbatim by "
     "several public repositories", LLAMA2),
    ("gemma-it", "gemma", None, "<bos>", "<eos>",
     "google/gemma-2b-it and gemma-2-9b-it tokenizer_config.json chat_template, as quoted verbatim by "
     "public repositories; this is Gemma 2's template: guidance-ai/guidance guidance/chat.py quotes "
     "google/gemma-2-9b-it tokenizer_config.json#L1747 (gemma2_9b_it_template) with exactly this text",
     GEMMA),
    ("gemma3-it", "gemma3", None, "<bos>", "<eos>",
     "google/gemma-3-*-it tokenizer_config.json chat_template, as quoted verbatim (JSON-escaped, beside its "
     "bos_token \"<bos>\") by several public repositories found with code search, e.g. the Gorilla BFCL "
     "Gemma handler; it takes a system message into the first user turn", GEMMA3),
    ("phi3.5-mini-instruct", "phi3", None, "<s>", "<|endoftext|>",
     "microsoft/Phi-3.5-mini-instruct, llama.cpp models/templates/microsoft-Phi-3.5-mini-instruct.jinja "
     "(ggerganov/llama.cpp, commit 7b5e0803)", PHI35),
    ("phi4-mini-instruct", "phi4-mini", None, "<|endoftext|>", "<|endoftext|>",
     "microsoft/Phi-4-mini-instruct tokenizer_config.json chat_template, as quoted verbatim by "
     "guidance-ai/guidance guidance/chat.py (phi_4_mini_template, citing the Hugging Face file's line 104) "
     "and by the Gorilla BFCL Phi handlers", PHI4_MINI),
    ("olmo2-instruct", "olmo2", None, "<|endoftext|>", "<|endoftext|>",
     "allenai/OLMo-2-1124-13B-Instruct tokenizer_config.json chat_template (Tulu 3 format), as copied in "
     "mauer4/Attention-From-Scratch weights/allenai/OLMo-2-1124-13B-Instruct/tokenizer_config.json", OLMO2),
    ("qwen3-0.6b", "qwen3", None, "", "<|im_end|>",
     "Qwen/Qwen3-0.6B, llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja as in the fork ye-NX/llama.cpp "
     "(commit b354d7c9; CRLF line endings there, LF here); a later llama.cpp copy "
     "(Indras-Mirror/llama.cpp-turboq-mtp) adds 'or reasoning_content' to the last_query_index test, "
     "which plumb does not recognise", QWEN3_0_6B),
    ("qwen3-8b", "qwen3", None, "", "<|im_end|>",
     "Qwen/Qwen3-8B tokenizer_config.json chat_template (later revision: 'message.content is string' "
     "checks), as quoted verbatim by guidance-ai/guidance guidance/chat.py (qwen3_it_template, citing the "
     "Hugging Face file's line 230)", QWEN3_8B),
    ("llama3.2-instruct", None, "Cutting Knowledge Date", "<|begin_of_text|>", "<|eot_id|>",
     "meta-llama/Llama-3.2-3B-Instruct, llama.cpp models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja: "
     "always writes a system turn with a dated preamble, which plumb does not render", LLAMA32),
    ("mistral-instruct-v0.2", "mistral", None, "<s>", "</s>",
     "mistralai/Mistral-7B-Instruct-v0.2 (its first template, without a system role), as in llama.cpp "
     "tests/test-chat-template.cpp; mistralai/Mixtral-8x7B-Instruct-v0.1 tokenizer_config.json has the same "
     "text (abetlen/llama-cpp-python llama_cpp/llama_chat_format.py, MIXTRAL_INSTRUCT_CHAT_TEMPLATE)",
     MISTRAL),
    ("mistral-instruct-v0.2-v1", None, "neither Meta's Llama 2", "<s>", "</s>",
     "mistralai/Mistral-7B-Instruct-v0.2 tokenizer_config.json chat_template, later revision, as quoted "
     "verbatim by guidance-ai/guidance guidance/chat.py (mistral_7b_instruct_template, citing the Hugging "
     "Face file's line 42) and llama.cpp tests/test-chat-template.cpp (\"mistralai 'v1' template with a "
     "system prompt\"): ' [INST] ' with a leading space and the system message folded in, which plumb "
     "does not render", MISTRAL_V1),
    ("vicuna-1.1", None, "not recognised", "<s>", "</s>",
     "eachadea/vicuna-13b-1.1 style, as in llama.cpp tests/test-chat-template.cpp: no known markers",
     VICUNA),
]


# --- the conversations ---------------------------------------------------------------------------------------

def S(text):
    return {"role": "system", "content": text}


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


def message(role, text):
    return {"role": role, "content": text}


CONVERSATIONS = [
    ("user_only", [U("Hello!")]),
    ("system_user", [S("You are a terse assistant."), U("What is 2+2?")]),
    ("multi_turn", [S("Be brief."), U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")]),
    ("multi_turn_no_system", [U("Hi"), A("Hello."), U("Bye")]),
    ("ends_with_assistant", [U("Name a colour."), A("Blue.")]),
    ("system_ends_with_assistant", [S("Answer in French."), U("Hello"), A("Bonjour"), U("Thanks"), A("De rien")]),
    ("no_system_ends_with_assistant", [U(" Hello "), A(" Hi!\n"), U("Thanks"), A("You're welcome. ")]),
    ("system_only", [S("You are a cat.")]),
    ("empty_user", [U("")]),
    ("empty_everything", [S(""), U(""), A(""), U("")]),
    ("empty_no_system", [U(""), A(""), U("")]),
    ("newlines", [S("Rules:\n1. be kind\n2. be brief\n"), U("line one\nline two\n\nline four"), A("\nok\n"),
                  U("\n")]),
    ("newlines_no_system", [U("\n\nfirst\n\n"), A("a\nb"), U("c\r\nd")]),
    ("unicode", [U("h\u00e9llo w\u00f6rld \u2014 \u65e5\u672c\u8a9e \U0001f642"), A("\u00a1Hola! \U0001f600"),
                 U("\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac")]),
    ("surrounding_spaces", [S("  padded system  "), U("  padded user  "), A("   padded answer   "),
                            U("\t tabbed \t")]),
    ("surrounding_spaces_no_system", [U("  padded user  "), A("   padded answer   "), U(" \v\f\r\n ")]),
    # Python's str.strip() (Jinja's trim) removes Unicode whitespace too, and only that.
    ("unicode_whitespace", [U("\u00a0nbsp, ideographic space\u3000"), A("\u2003em space\u2028"),
                            U("\u0085next line, unit separator\u001f"), A("\u200bzero width is not space\u200b"),
                            U("\u1680\u2000\u200a\u2029\u202f\u205f\u001c\u001d\u001e\u000b")]),
    ("markup_in_content", [U("{{ bos_token }} {% if x %} <|im_end|> [INST] <<SYS>> <|eot_id|>"),
                           A("<start_of_turn>model\n'quotes' \"double\" \\backslash\\n"), U("}}{{")]),
    ("markup_in_system", [S("<end_of_turn>\n<start_of_turn>model\n"), U("<end_of_turn>")]),
    ("two_users", [U("first"), U("second")]),
    ("two_assistants", [U("q"), A("a1"), A("a2")]),
    ("assistant_first", [A("I speak first."), U("ok")]),
    ("system_then_assistant", [S("sys"), A("Hello, I am the assistant.")]),
    ("empty_conversation", []),
    ("unknown_role", [U("What is 6*7?"), message("tool", "42")]),
    ("unknown_role_first", [message("tool", "42"), U("hi")]),
    ("system_not_first", [U("hi"), S("late system")]),
    ("system_third", [U("hi"), A("hello"), S("late system"), U("again")]),
    ("two_systems", [S("one"), S("two"), U("hi")]),
    # Qwen3 splits a reply at </think> and writes the reasoning back only for replies after the last user
    # query; a user message wrapped in <tool_response> tags does not count as a query.
    ("think_in_replies", [S("sys"), U("q1"), A("<think>\nstep 1\n</think>\n\nanswer 1"), U("q2"),
                          A("<think>\n\nstep 2\n\n</think>\n\n\nanswer 2")]),
    ("think_after_last_query", [U("q"), A("<think>r1</think>a1"), A("a2 </think> tail"), A("\nplain")]),
    ("tool_response_as_user", [U("q"), A("<think>x</think>a"), U("<tool_response>\n42\n</tool_response>"),
                               A("done")]),
    ("think_markers", [U("<think></think>"), A("<think></think>"), U("</think><think>"),
                       A("<think>a<think>b</think>c</think>d")]),
]


# --- tool conversations ------------------------------------------------------------------------------------
# Rendered with `tools` only for the templates that define tool use (TOOL_FORMATS), as transformers'
# apply_chat_template(messages, tools=...) passes them: the OpenAI tool objects as given. Tool calls carry
# their arguments as objects, as vLLM and llama.cpp hand them to templates (OpenAI's clients send a JSON
# string, which plumb serve parses first); a reply with tool calls has content "", not None (Qwen3-0.6B's
# template tests '</think>' in message.content).

TOOL_FORMATS = {"qwen2.5-instruct": "qwen2.5", "qwen3-0.6b": "qwen3", "qwen3-8b": "qwen3"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Recherche sur le web \u2014 r\u00e9sultats en fran\u00e7ais.\n\"Quoted\"",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                    "limit": {"type": "integer"}, "safe": {"type": "boolean"},
                                                    "tags": {"type": "array", "items": {"type": "string"}}},
                   "required": ["query"], "additionalProperties": False}}}
TOOLS = [WEATHER, SEARCH]


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def A_calls(content, *calls):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def T(call_id, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


PARIS = call("call_1", "get_weather", {"city": "Paris"})
BERLIN = call("call_2", "get_weather", {"city": "Berlin", "unit": "celsius"})
FIND = call("call_3", "search", {"query": "caf\u00e9 \"near\" me", "limit": 3, "safe": True, "tags": [], "x": None,
                                "ratio": 0.5, "nested": {"a": [1, 2.25, {"b": {}}]}})

TOOL_CONVERSATIONS = [
    ("tools_user_only", TOOLS, [U("What is the weather in Paris?")]),
    ("tools_system", TOOLS, [S("Be brief."), U("Weather in Paris?")]),
    ("tools_one_tool", [WEATHER], [U("Weather?")]),
    ("tools_call", TOOLS, [U("Weather in Paris?"), A_calls("", PARIS)]),
    ("tools_round_trip", TOOLS, [U("Weather in Paris?"), A_calls("", PARIS), T("call_1", "Sunny, 21 C")]),
    ("tools_answered", TOOLS, [S("sys"), U("Weather in Paris?"), A_calls("", PARIS), T("call_1", "Sunny"),
                               A("It is sunny."), U("And Berlin?")]),
    ("tools_parallel", TOOLS, [U("Paris and Berlin?"), A_calls("", PARIS, BERLIN), T("call_1", "Sunny"),
                               T("call_2", "{\"temp\": 12}")]),
    ("tools_content_and_call", TOOLS, [U("Find a caf\u00e9"), A_calls("Let me look.", FIND),
                                       T("call_3", "<b>Caf\u00e9 de Flore</b>\n2 km")]),
    ("tools_think_and_call", TOOLS, [U("Weather?"), A_calls("<think>\nNeed the city.\n</think>\n\n", PARIS),
                                     T("call_1", "Sunny"), A("<think>ok</think>Sunny.")]),
    ("tools_think_content_and_call", TOOLS, [U("Weather?"), A_calls("<think>r</think>\n\nChecking.", PARIS)]),
    ("tools_two_rounds", TOOLS, [U("q"), A_calls("", PARIS), T("call_1", "a"), A_calls("", BERLIN),
                                 T("call_2", "b")]),
    ("no_tools_history", None, [S("sys"), U("Weather in Paris?"), A_calls("", PARIS), T("call_1", "Sunny"),
                                A("Sunny.")]),
    ("no_tools_history_no_system", None, [U("Weather in Paris?"), A_calls("Sure.", PARIS),
                                          T("call_1", "Sunny")]),
]


def plumb_accepts(style, messages, tool_format=None):
    """plumb's rule for a conversation (src/tokenizer/chat_template_render.cpp implements the same rule); role
    "tool" only where the template defines tool use."""
    if not messages:
        return False
    roles = ("system", "user", "assistant") + (("tool",) if tool_format else ())
    for i, m in enumerate(messages):
        if m["role"] not in roles:
            return False
        if m["role"] == "system" and i > 0:
            return False
    if style in ("gemma", "mistral") and messages[0]["role"] == "system":
        return False
    if style in ("llama2", "gemma", "gemma3", "mistral"):
        turns = messages[1:] if messages[0]["role"] == "system" else messages
        for i, m in enumerate(turns):
            if (m["role"] == "user") != (i % 2 == 0):
                return False
    return True


def placed_contents(style, messages):
    """The message texts in the order and form the template writes them, which RenderWithContents must
    mark as contents; only for gemma3 (None otherwise): the system text as it is, then every other message
    stripped (Python's str.strip, which is Jinja's trim)."""
    if style != "gemma3":
        return None
    has_system = messages[0]["role"] == "system"
    out = []
    for i, m in enumerate(messages[1:] if has_system else messages):
        if i == 0 and has_system:
            out.append(messages[0]["content"])
        out.append(m["content"].strip())
    return out


# --- rendering as transformers does --------------------------------------------------------------------

class RaisedByTemplate(Exception):
    """What the template's raise_exception(message) throws (transformers throws jinja2's TemplateError)."""


def raise_exception(message):
    raise RaisedByTemplate(message)


def compile_template(text):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    return env.from_string(text)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' own tojson filter for chat templates (not jinja2's HTML-safe one)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render(compiled, messages, add_generation_prompt, bos, eos, tools=None):
    """(rendered text, None, None); (None, message, None) when the template called raise_exception(message);
    (None, None, description) when rendering failed otherwise (e.g. messages[0] of an empty list)."""
    try:
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=bos, eos_token=eos, tools=tools), None, None
    except RaisedByTemplate as error:
        return None, str(error), None
    except jinja2.TemplateError as error:
        return None, None, f"{type(error).__name__}: {error}"


def default_system_prompt(compiled, style, bos, eos):
    """The system text a ChatML template inserts before a lone user message ("" if none), read off its
    rendering rather than its source, so that it checks plumb's extraction from the source."""
    if style != "chatml":
        return ""
    text, _, _ = render(compiled, [U("probe")], False, bos, eos)
    header = "<|im_start|>system\n"
    if not text.startswith(header):
        return ""
    return text[len(header):text.index("<|im_end|>")]


def build_fixture(name, style, refusal, bos, eos, source, text):
    fixture = {
        "generator": GENERATOR,
        "jinja2_version": JINJA2_VERSION,
        "name": name,
        "source": source,
        "template": text,
        "bos_token": bos,
        "eos_token": eos,
        "style": style,
    }
    if style is None:
        fixture["refusal"] = refusal
        fixture["cases"] = []
        return fixture
    compiled = compile_template(text)
    fixture["default_system_prompt"] = default_system_prompt(compiled, style, bos, eos)
    cases = []
    prefix_checked = 0
    prefix_holds = True
    for conv_name, messages in CONVERSATIONS:
        accepts = plumb_accepts(style, messages, TOOL_FORMATS.get(name))
        for add_generation_prompt in (False, True):
            rendered, error, failure = render(compiled, messages, add_generation_prompt, bos, eos)
            case = {"name": conv_name, "messages": messages, "add_generation_prompt": add_generation_prompt,
                    "plumb_accepts": accepts}
            if accepts:
                if rendered is None:
                    sys.exit(f"{name}/{conv_name}: plumb accepts a conversation the real template rejects: "
                             f"{error or failure}")
                case["rendered"] = rendered
                contents = placed_contents(style, messages)
                if contents is not None:
                    at = 0
                    for text in contents:  # each where the rendering has it, in order
                        at = rendered.index(text, at) + len(text)
                    case["contents"] = contents
            elif error is not None:
                case["jinja_error"] = error
            elif failure is not None:
                case["jinja_failure"] = failure
            else:
                case["jinja_rendered"] = rendered
            cases.append(case)
        # The prefix property the chat loop relies on (see the C++ test).
        follow_up = messages + [U("And one more thing?")]
        if accepts and messages[-1]["role"] == "assistant" and plumb_accepts(style, follow_up,
                                                                            TOOL_FORMATS.get(name)):
            before = render(compiled, messages, False, bos, eos)[0]
            after = render(compiled, follow_up, True, bos, eos)[0]
            prefix_checked += 1
            prefix_holds = prefix_holds and after.startswith(before)
    if prefix_checked < 2:
        sys.exit(f"{name}: fewer than two conversations exercise the prefix property")
    fixture["prefix_property"] = prefix_holds
    fixture["cases"] = cases
    fixture["tool_format"] = TOOL_FORMATS.get(name)
    if fixture["tool_format"] is not None:
        tool_cases = []
        for conv_name, tools, messages in TOOL_CONVERSATIONS:
            for add_generation_prompt in (False, True):
                rendered, error, failure = render(compiled, messages, add_generation_prompt, bos, eos, tools)
                if rendered is None:
                    sys.exit(f"{name}/{conv_name}: the real template fails: {error or failure}")
                tool_cases.append({"name": conv_name, "tools": tools, "messages": messages,
                                   "add_generation_prompt": add_generation_prompt, "rendered": rendered})
        fixture["tool_cases"] = tool_cases
    return fixture


def serialise(fixture):
    # ASCII-only output: every non-ASCII and control character is an explicit escape in the file.
    return json.dumps(fixture, indent=1, ensure_ascii=True) + "\n"


def check_gguf(path):
    import gguf  # only needed for this check

    reader = gguf.GGUFReader(path)
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    if text != SMOLLM2:
        sys.exit(f"{path}: tokenizer.chat_template differs from the SMOLLM2 text in {GENERATOR}")
    print(f"{path}: tokenizer.chat_template is the smollm2-135m-instruct template")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "fixtures", "chat"))
    parser.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    parser.add_argument("--gguf", help="a SmolLM2 GGUF whose tokenizer.chat_template must equal SMOLLM2")
    args = parser.parse_args()
    if jinja2.__version__ != JINJA2_VERSION:
        sys.exit(f"jinja2 {jinja2.__version__} installed; the fixtures are made with {JINJA2_VERSION}")
    if args.gguf:
        check_gguf(args.gguf)

    outputs = {f"{t[0]}.json": serialise(build_fixture(*t)) for t in TEMPLATES}
    if args.check:
        stale = []
        for file_name, content in outputs.items():
            path = os.path.join(args.out, file_name)
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != content:
                stale.append(file_name)
        extra = sorted(set(f for f in os.listdir(args.out) if f.endswith(".json")) - set(outputs))
        if stale or extra:
            sys.exit(f"fixtures/chat differs from the generator: stale {stale}, not generated {extra}")
        print(f"{len(outputs)} chat template fixtures reproduce exactly")
        return
    os.makedirs(args.out, exist_ok=True)
    for file_name, content in outputs.items():
        with open(os.path.join(args.out, file_name), "w", encoding="utf-8") as f:
            f.write(content)
    print(f"wrote {len(outputs)} fixtures to {args.out}")


if __name__ == "__main__":
    main()
