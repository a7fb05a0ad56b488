#!/usr/bin/env python3
"""Writes the chat-template goldens that tests/text/chat_template_test.cpp checks folio against.

  tests/golden/chat/<name>.jinja  the template, byte for byte as the model ships it
  tests/golden/chat/<name>.json   conversations and what Hugging Face renders for each
                                  ("expected"), or the error it raises ("expected_error")

The reference is transformers' own renderer (transformers.utils.chat_template_utils.
render_jinja_template, what tokenizer.apply_chat_template(..., tokenize=False) calls), which
needs only `pip install transformers jinja2` (no torch). Without transformers the script falls
back to a jinja2 environment configured the same way (see hf_style_render).

Templates and where their text comes from (Llama-3 and Gemma-2 carry real newline characters
inside their string literals, as their tokenizer_config.json files decode to):
  smollm2            tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (read here)
  llama-3-instruct   Meta-Llama-3-8B-Instruct tokenizer_config.json (as committed in the
                     public repo YJiangcm/WebR)
  mistral-7b-instruct-v0.3
                     mistralai's "v3" template, which Mistral-7B-Instruct-v0.3 and
                     Mistral-Large-Instruct-2407 ship (as quoted in llama.cpp's
                     tests/test-chat-template.cpp)
  qwen2.5-instruct   Qwen2.5-*-Instruct tokenizer_config.json (as quoted in
                     gorilla/berkeley-function-call-leaderboard's Qwen handler)
  gemma-2-it         llama.cpp's models/templates/google-gemma-2-2b-it.jinja
  gemma-3-it         google/gemma-3-*-it tokenizer_config.json (as quoted in public code that
                     sets it on the gemma-3-270m GGUF's tokenizer; the GGUF carries none)

    python scripts/make-chat-goldens.py [--models-dir DIR]
"""

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO / "tests" / "golden" / "chat"

LLAMA_3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\n\n' }}{% endif %}"
)

MISTRAL_V3 = r'''{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
'''

QWEN_2_5 = r'''{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
'''

GEMMA_2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/"
    "user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = "
    "'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + "
    "'\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

GEMMA_3 = '''{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}'''

# name -> (template source or None for "read from the GGUF", special tokens HF passes)
TEMPLATES = {
    "smollm2": (None, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}),
    "llama-3-instruct": (LLAMA_3, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "mistral-7b-instruct-v0.3": (MISTRAL_V3, {"bos_token": "<s>", "eos_token": "</s>"}),
    "qwen2.5-instruct": (QWEN_2_5, {"eos_token": "<|im_end|>"}),
    "gemma-2-it": (GEMMA_2, {"bos_token": "<bos>", "eos_token": "<eos>"}),
    "gemma-3-it": (GEMMA_3, {"bos_token": "<bos>", "eos_token": "<eos>"}),
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CONVERSATIONS = [
    ("single_user", [{"role": "user", "content": "Hello!"}], True),
    ("single_user_no_prompt", [{"role": "user", "content": "Hello!"}], False),
    ("system_and_user", [SYSTEM, {"role": "user", "content": "What is 2 + 2?"}], True),
    ("multi_turn_with_system", [
        SYSTEM,
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ], True),
    ("multi_turn_no_system", [
        {"role": "user", "content": "Who are you?"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "Another question"},
        {"role": "assistant", "content": "Sure, ask away."},
    ], False),
    ("unicode", [
        {"role": "user", "content": "Grüße! 你好，世界 🙂 — naïve café, مرحبا, Ελληνικά\u00a0\u3000"},
        {"role": "assistant", "content": "\u3000こんにちは 👋🏽\n"},
        {"role": "user", "content": "e\u0301 (combining) and \U0001F9D1\u200D\U0001F4BB"},
    ], True),
    ("braces_and_quotes", [
        {"role": "user", "content": "Render {{ this }} and {% if x %}that{% endif %} {# not #} "
                                    "'single' \"double\" \\backslash\\ `tick` {\"json\": [1, 2]}"},
        {"role": "assistant", "content": "{'a': 1} }} {{ %} {%"},
        {"role": "user", "content": "<|im_end|> [INST] <start_of_turn> </s>"},
    ], True),
    ("whitespace_content", [
        {"role": "user", "content": "\n\n  padded question  \n\t"},
        {"role": "assistant", "content": " \n answer with spaces \n "},
        {"role": "user", "content": "line one\nline two\r\nline three"},
    ], True),
    ("empty_content", [{"role": "user", "content": ""}], True),
    ("assistant_last", [
        {"role": "user", "content": "Complete this: roses are"},
        {"role": "assistant", "content": "red"},
    ], False),
    ("system_only", [SYSTEM], True),
    ("two_users_in_a_row", [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ], True),
    ("starts_with_assistant", [
        {"role": "assistant", "content": "I speak first."},
        {"role": "user", "content": "OK."},
    ], True),
    ("unknown_role", [
        {"role": "user", "content": "hi"},
        {"role": "narrator", "content": "Meanwhile..."},
    ], True),
]


def hf_style_render(template, messages, add_generation_prompt, extra):
    """Fallback when transformers is missing: its environment, rebuilt from its source."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, tools=None, documents=None,
                                            add_generation_prompt=add_generation_prompt, **extra)


def render(template, messages, add_generation_prompt, extra):
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        return hf_style_render(template, messages, add_generation_prompt, extra)
    rendered, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                        add_generation_prompt=add_generation_prompt, **extra)
    return rendered[0]


def renderer_name():
    import jinja2
    try:
        import transformers
        return f"transformers {transformers.__version__} render_jinja_template, jinja2 {jinja2.__version__}"
    except ImportError:
        return f"jinja2 {jinja2.__version__} configured as transformers does"


def read_gguf_template(models_dir):
    from gguf import GGUFReader
    path = Path(models_dir) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default=os.environ.get(
        "FOLIO_MODELS_DIR", str(Path.home() / ".cache" / "folio" / "models")))
    args = parser.parse_args()
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    import jinja2.exceptions

    for name, (source, special_tokens) in TEMPLATES.items():
        template = source if source is not None else read_gguf_template(args.models_dir)
        (GOLDEN_DIR / f"{name}.jinja").write_bytes(template.encode("utf-8"))
        cases = []
        for case_name, messages, add_generation_prompt in CONVERSATIONS:
            case = {"name": case_name, "messages": messages,
                    "add_generation_prompt": add_generation_prompt,
                    "extra_context": special_tokens}
            try:
                case["expected"] = render(template, messages, add_generation_prompt, special_tokens)
            except jinja2.exceptions.TemplateError as error:
                case["expected_error"] = str(error)
            cases.append(case)
        golden = {"template": f"{name}.jinja", "renderer": renderer_name(), "cases": cases}
        with open(GOLDEN_DIR / f"{name}.json", "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        errors = sum("expected_error" in c for c in cases)
        print(f"{name}: {len(cases)} cases ({errors} raise)", file=sys.stderr)


if __name__ == "__main__":
    main()
