#!/usr/bin/env python3
# Makes tests/data/chat_golden.json: reference renderings of the DeepSeek chat formats (v2, v3, r1, v31,
# v32exp, v32) for the C++ chat-format tests. Seeded and deterministic; meant for the device machine,
# where transformers renders the Jinja templates exactly as apply_chat_template does.
#
#   python3 scripts/make_chat_golden.py --v3-tokenizer-config tests/data/downloads/deepseek_v3_tokenizer/tokenizer_config.json \
#       --out tests/data/chat_golden.json
#
# Where each reference comes from:
# - v3: the chat_template string of the real DeepSeek-V3 tokenizer_config.json (read from disk).
# - v2, r1, v31, v32exp: the official templates (DeepSeek-V2-Chat, DeepSeek-R1, DeepSeek-V3.1,
#   DeepSeek-V3.1-Terminus / V3.2-Exp tokenizer_config.json) are not available here, so they are written
#   out below from public copies of those files; v31/v32exp add a `tools` block in the layout of the
#   V3.1 model card / SGLang's tool templates (the official V3.1 template ignores `tools`).
# - v32: DeepSeek's reference encoder encoding_dsv32.py when the installed transformers ships it
#   (models/deepseek_v32/deepseek_files/encoding/), otherwise the re-implementation in this file, which
#   is checked against DeepSeek's own test_input.json/test_output.txt (tests/data/chat_dsv32_*).
# Rendering uses transformers' render_jinja_template when importable, else a jinja2 environment built
# the same way (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson with
# ensure_ascii=False). The output records which renderer and which v32 encoder were used.
import argparse
import copy
import importlib.util
import json
import os
import random
import sys

SEED = 20251201
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"

# ----------------------------------------------------------------------------------------------
# Reference templates (single-line, as in the tokenizer_config.json files)
# ----------------------------------------------------------------------------------------------
V2_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

_SYSTEM_COLLECT = (
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}"
    "{% set ns.is_first_sp = false %}"
    "{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}"
    "{%- endif %}{%- endfor %}"
)

_V3_CALL = ("tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + "
            "tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'")

R1_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', "
    "is_first_sp=true) %}"
    + _SYSTEM_COLLECT +
    "{{ bos_token }}{{ ns.system_prompt }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}"
    "{%- endif %}"
    "{%- if message['role'] == 'assistant' and 'tool_calls' in message %}{%- set ns.is_tool = false -%}"
    "{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}"
    "{%- if message['content'] is none %}"
    "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + " + _V3_CALL + "}}"
    "{%- else %}"
    "{{'<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + "
    + _V3_CALL + "}}"
    "{%- endif %}{%- set ns.is_first = true -%}"
    "{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + " + _V3_CALL + "}}{%- endif %}"
    "{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}"
    "{%- if message['role'] == 'assistant' and 'tool_calls' not in message %}"
    "{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}"
    "{%- set ns.is_tool = false -%}"
    "{%- else %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}"
    "{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}"
    "{%- if ns.is_output_first %}"
    "{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}"
    "{%- set ns.is_output_first = false %}"
    "{%- else %}{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}"
    "{%- endif %}"
    "{%- endfor -%}"
    "{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}"
    "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
)

# The tools block of the V3.1 model card (as SGLang's tool_chat_template_deepseekv31.jinja builds it),
# appended to the system prompt; without stray whitespace.
_V31_TOOLS = (
    "{%- if tools is defined and tools is not none %}"
    "{%- set tool_ns = namespace(text='## Tools\\nYou have access to the following tools:\\n') %}"
    "{%- for tool in tools %}"
    "{%- set tool_ns.text = tool_ns.text + '\\n### ' + tool.function.name + '\\nDescription: ' + "
    "tool.function.description + '\\n\\nParameters: ' + (tool.function.parameters | tojson) + '\\n' %}"
    "{%- endfor %}"
    "{%- set tool_ns.text = tool_ns.text + \"\\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\\n"
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
    "<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\\n\\nWhere:\\n\\n"
    "- `tool_call_name` must be an exact match to one of the available tools\\n"
    "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\\n"
    "- For multiple tool calls, chain them directly without separators or spaces\\n\" %}"
    "{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + tool_ns.text %}"
    "{%- endif %}"
)

_V31_CALLS = (
    "{%- set ns.is_last_user = false -%}{%- set ns.is_first = false %}{%- set ns.is_tool = false -%}"
    "{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}"
    "{%- if message['content'] is none %}"
    "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + "
    "tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"
    "{%- else %}"
    "{{message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + "
    "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"
    "{%- endif %}{%- set ns.is_first = true -%}"
    "{%- else %}{{'<｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + "
    "tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}{%- endif %}"
    "{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}"
)


def _v31_family_template(terminus):
    """DeepSeek-V3.1 (terminus=False) or V3.1-Terminus / V3.2-Exp (terminus=True, adds is_only_sys and
    is_prefix)."""
    t = "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    t += "{% if not thinking is defined %}{% set thinking = false %}{% endif %}"
    if terminus:
        t += ("{% set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true, "
              "is_last_user=false, is_only_sys=false, is_prefix=false) %}")
        t += _SYSTEM_COLLECT.replace("{%- endif %}{%- endif %}{%- endfor %}",
                                     "{%- endif %}{% set ns.is_only_sys = true %}{%- endif %}{%- endfor %}")
    else:
        t += ("{% set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true, "
              "is_last_user=false) %}")
        t += _SYSTEM_COLLECT
    t += _V31_TOOLS
    t += "{{ bos_token }}{{ ns.system_prompt }}"
    t += "{%- for message in messages %}"
    t += ("{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{%- set ns.is_first = false -%}"
          "{%- set ns.is_last_user = true -%}{{'<｜User｜>' + message['content']}}{%- endif %}")
    t += ("{%- if message['role'] == 'assistant' and message['tool_calls'] is defined and "
          "message['tool_calls'] is not none %}")
    t += ("{%- if ns.is_last_user or ns.is_only_sys %}" if terminus else "{%- if ns.is_last_user %}")
    t += "{{'<｜Assistant｜></think>'}}{%- endif %}"
    t += _V31_CALLS
    t += ("{%- if message['role'] == 'assistant' and (message['tool_calls'] is not defined or "
          "message['tool_calls'] is none) %}"
          "{%- if ns.is_last_user %}{{'<｜Assistant｜>'}}"
          "{%- if message['prefix'] is defined and message['prefix'] and thinking %}{{'<think>'}}"
          "{%- else %}{{'</think>'}}{%- endif %}{%- endif %}")
    if terminus:
        t += "{%- if message['prefix'] is defined and message['prefix'] %}{%- set ns.is_prefix = true -%}{%- endif %}"
    t += ("{%- set ns.is_last_user = false -%}"
          "{%- if ns.is_tool %}{{message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}"
          "{%- else %}{%- set content = message['content'] -%}"
          "{%- if '</think>' in content %}{%- set content = content.split('</think>', 1)[1] -%}{%- endif %}"
          "{{content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}")
    t += ("{%- if message['role'] == 'tool' %}{%- set ns.is_last_user = false -%}{%- set ns.is_tool = true -%}"
          "{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}")
    if terminus:
        t += "{%- if message['role'] != 'system' %}{% set ns.is_only_sys = false %}{%- endif %}"
    t += "{%- endfor -%}"
    if terminus:
        t += ("{% if add_generation_prompt and not ns.is_tool%}"
              "{% if ns.is_last_user or ns.is_only_sys or not ns.is_prefix %}{{'<｜Assistant｜>'}}"
              "{%- if not thinking %}{{'</think>'}}{%- else %}{{'<think>'}}{%- endif %}{% endif %}{% endif %}")
    else:
        t += ("{%- if add_generation_prompt and ns.is_last_user and not ns.is_tool %}{{'<｜Assistant｜>'}}"
              "{%- if not thinking %}{{'</think>'}}{%- else %}{{'<think>'}}{%- endif %}{% endif %}")
    return t


V31_TEMPLATE = _v31_family_template(terminus=False)
V32EXP_TEMPLATE = _v31_family_template(terminus=True)


# ----------------------------------------------------------------------------------------------
# Jinja rendering: transformers' own function when available, else an equivalent environment
# ----------------------------------------------------------------------------------------------
def make_renderer():
    try:
        from transformers.utils.chat_template_utils import render_jinja_template  # noqa: F401
        import transformers

        def render(template, messages, tools, add_generation_prompt, **kwargs):
            out, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                           add_generation_prompt=add_generation_prompt, **kwargs)
            return out[0]
        return render, f"transformers {transformers.__version__} render_jinja_template"
    except Exception as e:  # noqa: BLE001
        print(f"transformers renderer unavailable ({e!r}); using jinja2 directly", file=sys.stderr)
    import jinja2
    import jinja2.sandbox
    from jinja2.ext import loopcontrols

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                      extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception

    def render(template, messages, tools, add_generation_prompt, **kwargs):
        return env.from_string(template).render(messages=messages, tools=tools,
                                                add_generation_prompt=add_generation_prompt, **kwargs)
    return render, f"jinja2 {jinja2.__version__} (transformers-equivalent environment)"


# ----------------------------------------------------------------------------------------------
# V3.2 encoder: DeepSeek's encoding_dsv32.py when installed, else this re-implementation
# ----------------------------------------------------------------------------------------------
class Dsv32Encoder:
    """Re-implementation of the DeepSeek-V3.2 prompt encoding (encode_messages of encoding_dsv32.py)."""
    DSML = "｜DSML｜"

    def tools_text(self, tools):
        d = self.DSML
        schemas = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in tools)
        return (
            "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
            f"You can invoke functions by writing a \"<{d}function_calls>\" block like the following as part "
            "of your reply to the user:\n"
            f"<{d}function_calls>\n<{d}invoke name=\"$FUNCTION_NAME\">\n"
            f"<{d}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{d}parameter>\n"
            f"...\n</{d}invoke>\n<{d}invoke name=\"$FUNCTION_NAME2\">\n...\n</{d}invoke>\n</{d}function_calls>\n\n"
            "String and scalar parameters should be specified as is without any escaping or quotes, while "
            "lists and objects should use JSON format. The \"string\" attribute should be set to \"true\" for "
            "string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n"
            "If the thinking_mode is enabled, then after function results you should strongly consider "
            "outputting a thinking block. Here is an example:\n\n"
            f"<{d}function_calls>\n...\n</{d}function_calls>\n\n<function_results>\n...\n</function_results>\n\n"
            "<think>...thinking about results</think>\n\n"
            "Here are the functions available in JSONSchema format:\n<functions>\n"
            f"{schemas}\n</functions>\n")

    def call_text(self, call):
        d = self.DSML
        params = []
        for k, v in json.loads(call["function"]["arguments"]).items():
            is_str = isinstance(v, str)
            val = v if is_str else json.dumps(v, ensure_ascii=False)
            params.append(f'<{d}parameter name="{k}" string="{"true" if is_str else "false"}">{val}</{d}parameter>')
        return f'<{d}invoke name="{call["function"]["name"]}">\n' + "\n".join(params) + f"\n</{d}invoke>"

    def encode_messages(self, messages, thinking_mode, drop_thinking=True):
        thinking = thinking_mode == "thinking"
        last_user = -1
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") in ("user", "developer"):
                last_user = i
                break
        if thinking and drop_thinking:
            kept = []
            for i, m in enumerate(messages):
                if m.get("role") == "assistant" and i < last_user:
                    m = dict(m)
                    m.pop("reasoning_content", None)
                kept.append(m)
            messages = kept
        out = BOS
        for i, m in enumerate(messages):
            role, content = m.get("role"), m.get("content")
            close = "<think>" if (i == last_user and thinking) else "</think>"
            if role == "system":
                out += content or ""
                if m.get("tools"):
                    out += "\n\n" + self.tools_text(m["tools"])
                if m.get("response_format"):
                    out += ("\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
                            "reply:\n" + json.dumps(m["response_format"], ensure_ascii=False))
            elif role == "developer":
                body = ""
                if m.get("tools"):
                    body += "\n\n" + self.tools_text(m["tools"])
                if m.get("response_format"):
                    body += ("\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
                             "reply:\n" + json.dumps(m["response_format"], ensure_ascii=False))
                body += f"\n\n# The user's message is: {content}"
                out += f"<｜User｜>{body}<｜Assistant｜>" + close
            elif role == "user":
                out += f"<｜User｜>{content}<｜Assistant｜>" + close
            elif role == "tool":
                j = i - 1
                while j >= 0 and messages[j].get("role") == "tool":
                    j -= 1
                order = i - j
                calls = messages[j].get("tool_calls") or []
                assert len(calls) >= order, "tool output without a matching tool call"
                if order == 1:
                    out += "\n\n<function_results>"
                out += f"\n<result>{content}</result>"
                if order == len(calls):
                    out += "\n</function_results>"
                    out += "\n\n" + ("<think>" if (i >= last_user and thinking) else "</think>")
            elif role == "assistant":
                calls = m.get("tool_calls")
                calls_text = ""
                if calls:
                    d = self.DSML
                    calls_text = (f"\n\n<{d}function_calls>\n" + "\n".join(self.call_text(c) for c in calls)
                                  + f"\n</{d}function_calls>")
                reasoning = ""
                if thinking and i > last_user:
                    assert m.get("reasoning_content") or calls, "assistant after last user needs reasoning"
                    reasoning = (m.get("reasoning_content") or "") + "</think>"
                out += reasoning + (content or "") + calls_text + EOS
            else:
                raise ValueError(f"unknown role {role}")
        return out


def load_dsv32_encoder():
    try:
        import transformers
        base = os.path.join(os.path.dirname(transformers.__file__), "models", "deepseek_v32", "deepseek_files",
                            "encoding", "encoding_dsv32.py")
        if os.path.exists(base):
            spec = importlib.util.spec_from_file_location("encoding_dsv32", base)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod, f"DeepSeek encoding_dsv32.py from transformers {transformers.__version__}"
    except Exception as e:  # noqa: BLE001
        print(f"encoding_dsv32 unavailable ({e!r})", file=sys.stderr)
    return Dsv32Encoder(), "re-implementation in scripts/make_chat_golden.py"


def v32_prepare(messages, tools):
    """What the server does before encoding: an empty system message first, carrying `tools`."""
    msgs = copy.deepcopy(messages)
    if not msgs or msgs[0].get("role") != "system":
        msgs.insert(0, {"role": "system", "content": ""})
    if tools:
        msgs[0]["tools"] = copy.deepcopy(tools)
    return msgs


# ----------------------------------------------------------------------------------------------
# Conversations
# ----------------------------------------------------------------------------------------------
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city (Búsqueda 天气 ☀️)",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "default": 5},
            "filters": {"type": "object", "properties": {"site": {"type": "string"},
                                                         "after": {"type": "number", "default": 0.5}}}},
            "required": ["query"], "additionalProperties": False}}},
]


def call(cid, name, args):
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def conversations():
    c = {}
    c["single_user"] = [{"role": "user", "content": "Hello! What is 2+2?"}]
    c["system_user"] = [{"role": "system", "content": "You are a helpful assistant."},
                        {"role": "user", "content": "Write a haiku about the sea."}]
    c["two_systems_multi_turn"] = [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "Name a prime number."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "Another one?"}]
    c["ends_with_assistant"] = [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi!"}]
    c["history_with_think"] = [
        {"role": "user", "content": "What is 3*4?"},
        {"role": "assistant", "content": "<think>\n3 times 4 is 12.\n</think>\n\nThe answer is 12."},
        {"role": "user", "content": "And 5*6?"}]
    c["unicode_escapes"] = [
        {"role": "system", "content": "Réponds en français. 回答要简洁。"},
        {"role": "user", "content": "你好，世界！🌍 \"quotes\" and \\backslash\\ \ttab\nnew line"},
        {"role": "assistant", "content": "こんにちは 👋\n\n**bold** `code`"},
        {"role": "user", "content": "Ещё раз? <b>html</b> & {braces} {{jinja}}"}]
    c["reasoning_in_history"] = [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "reasoning_content": "91 = 7 * 13.", "content": "No, 91 = 7 × 13."},
        {"role": "user", "content": "Is 97 prime?"}]
    c["tool_single"] = [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "Need the weather tool.",
         "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear in Paris."},
        {"role": "user", "content": "And in Tokyo?"}]
    c["tool_parallel_ends_with_tool"] = [
        {"role": "user", "content": "Compare the weather in Oslo and Rome."},
        {"role": "assistant", "content": None, "reasoning_content": "Two calls in parallel.",
         "tool_calls": [call("call_a", "get_weather", {"city": "Oslo"}),
                        call("call_b", "get_weather", {"city": "Rome", "unit": "fahrenheit"})]},
        {"role": "tool", "tool_call_id": "call_a", "content": "-3 C, snow"},
        {"role": "tool", "tool_call_id": "call_b", "content": "68 F, sunny"}]
    c["tool_two_rounds"] = [
        {"role": "user", "content": "Find a café in Zürich, then its weather."},
        {"role": "assistant", "content": None, "reasoning_content": "Search first.",
         "tool_calls": [call("c1", "search", {"query": "café Zürich", "top_k": 3,
                                              "filters": {"site": "example.org", "after": 1e-07}})]},
        {"role": "tool", "tool_call_id": "c1", "content": "Café Sprüngli, Paradeplatz"},
        {"role": "assistant", "content": None, "reasoning_content": "Now the weather.",
         "tool_calls": [call("c2", "get_weather", {"city": "Zürich"})]},
        {"role": "tool", "tool_call_id": "c2", "content": "12 C, cloudy"},
        {"role": "assistant", "reasoning_content": "Summarize.",
         "content": "Café Sprüngli on Paradeplatz; it is 12 °C and cloudy."}]
    c["tool_with_content"] = [
        {"role": "user", "content": "Search for llamas."},
        {"role": "assistant", "content": "Let me look that up.", "reasoning_content": "Use search.",
         "tool_calls": [call("s1", "search", {"query": "llamas", "flags": [True, False, None],
                                              "ratio": 2.5, "big": 1e16, "neg": -0.0001})]},
        {"role": "tool", "tool_call_id": "s1", "content": "Llamas are camelids."},
        {"role": "assistant", "reasoning_content": "Answer.", "content": "Llamas are camelids."},
        {"role": "user", "content": "Thanks"}]
    c["empty"] = []
    c["system_only"] = [{"role": "system", "content": "Only a system prompt."}]
    c["system_then_tool_call"] = [
        {"role": "system", "content": "Call tools eagerly."},
        {"role": "assistant", "content": None, "tool_calls": [call("z", "search", {"query": "x"})]},
        {"role": "tool", "tool_call_id": "z", "content": "result"}]
    c["prefix_assistant"] = [
        {"role": "user", "content": "Continue the list: apples,"},
        {"role": "assistant", "content": "apples, pears,", "prefix": True}]
    c["developer_role"] = [
        {"role": "developer", "content": "Use the search tool if needed. What is the capital of Peru?"}]
    return c


def random_conversations(rng, n):
    words = ["alpha", "βeta", "γάμμα", "数据", "模型", "😀", "naïve", "O'Neil", "{x}", "<tag>", "\"q\"",
             "back\\slash", "tab\there", "line\nbreak", "1e-5", "1000000", "  spaced  ", "ok"]
    convs = {}
    for k in range(n):
        msgs = []
        if rng.random() < 0.6:
            msgs.append({"role": "system", "content": " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))})
        turns = rng.randint(1, 3)
        for t in range(turns):
            msgs.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))})
            if t == turns - 1 and rng.random() < 0.5:
                break
            if rng.random() < 0.4:
                ncalls = rng.randint(1, 2)
                calls = []
                for j in range(ncalls):
                    args = {"query": rng.choice(words), "top_k": rng.randint(1, 9),
                            "score": round(rng.uniform(-5, 5), rng.randint(1, 6)),
                            "tags": [rng.choice(words) for _ in range(rng.randint(0, 3))],
                            "opt": rng.choice([True, False, None])}
                    calls.append(call(f"r{k}_{t}_{j}", "search", args))
                msgs.append({"role": "assistant", "content": None,
                             "reasoning_content": rng.choice(words), "tool_calls": calls})
                for j in range(ncalls):
                    msgs.append({"role": "tool", "tool_call_id": f"r{k}_{t}_{j}",
                                 "content": " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))})
                if rng.random() < 0.3 and t == turns - 1:
                    break
            msgs.append({"role": "assistant", "reasoning_content": rng.choice(words),
                         "content": " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))})
        convs[f"random_{k}"] = msgs
    return convs


def has_tools(msgs):
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--v3-tokenizer-config", required=True)
    ap.add_argument("--dsv32-input", default="tests/data/chat_dsv32_test_input.json")
    ap.add_argument("--dsv32-output", default="tests/data/chat_dsv32_test_output.txt")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    with open(args.v3_tokenizer_config, encoding="utf-8") as f:
        v3_template = json.load(f)["chat_template"]
    templates = {"v2": V2_TEMPLATE, "v3": v3_template, "r1": R1_TEMPLATE, "v31": V31_TEMPLATE,
                 "v32exp": V32EXP_TEMPLATE}
    render, renderer_name = make_renderer()
    enc, enc_name = load_dsv32_encoder()

    # The v32 encoder must reproduce DeepSeek's own golden pair before it is trusted.
    with open(args.dsv32_input, encoding="utf-8") as f:
        td = json.load(f)
    with open(args.dsv32_output, encoding="utf-8") as f:
        gold = f.read().strip()
    msgs = copy.deepcopy(td["messages"])
    msgs[0]["tools"] = td["tools"]
    got = enc.encode_messages(msgs, thinking_mode="thinking", drop_thinking=True)
    assert got == gold, "v32 encoder does not reproduce DeepSeek's test_output.txt"

    rng = random.Random(SEED)
    convs = conversations()
    convs.update(random_conversations(rng, 8))
    cases, skipped = [], []

    def add(name, fmt, msgs, tools, gen, thinking, expected):
        cases.append({"name": name, "format": fmt, "messages": msgs, "tools": tools,
                      "add_generation_prompt": gen, "thinking": thinking, "expected": expected})

    for cname, msgs in convs.items():
        tool_variants = [None, TOOLS] if has_tools(msgs) or cname in ("system_user", "developer_role") else [None]
        for fmt in ("v2", "v3", "r1", "v31", "v32exp"):
            if cname == "developer_role":
                continue
            if fmt == "v2" and has_tools(msgs):
                continue
            if fmt not in ("v31", "v32exp") and cname == "prefix_assistant":
                continue
            for tools in tool_variants:
                for gen in (True, False):
                    for thinking in ((False, True) if fmt in ("v31", "v32exp") else (False,)):
                        kwargs = {"bos_token": BOS, "eos_token": EOS}
                        if fmt in ("v31", "v32exp"):
                            kwargs["thinking"] = thinking
                        name = f"{fmt}/{cname}/tools={tools is not None}/gen={gen}/thinking={thinking}"
                        try:
                            out = render(templates[fmt], copy.deepcopy(msgs), tools, gen, **kwargs)
                        except Exception as e:  # noqa: BLE001
                            skipped.append({"name": name, "reason": repr(e)[:200]})
                            continue
                        add(name, fmt, msgs, tools, gen, thinking, out)
        for tools in tool_variants:
            for thinking in (False, True):
                name = f"v32/{cname}/tools={tools is not None}/thinking={thinking}"
                try:
                    out = enc.encode_messages(v32_prepare(msgs, tools),
                                              thinking_mode="thinking" if thinking else "chat")
                except Exception as e:  # noqa: BLE001
                    skipped.append({"name": name, "reason": repr(e)[:200]})
                    continue
                add(name, "v32", msgs, tools, True, thinking, out)

    # DeepSeek's own example, as the server receives it (tools in the request, not in the message).
    add("v32/deepseek_test_input/thinking=True", "v32", td["messages"], td["tools"], True, True,
        enc.encode_messages(v32_prepare(td["messages"], td["tools"]), thinking_mode="thinking"))

    per_format = {}
    for c in cases:
        per_format[c["format"]] = per_format.get(c["format"], 0) + 1
    for fmt in ("v2", "v3", "r1", "v31", "v32exp", "v32"):
        assert per_format.get(fmt, 0) >= 10, f"too few cases for {fmt}: {per_format}"

    out = {"generator": "scripts/make_chat_golden.py", "seed": SEED, "renderer": renderer_name,
           "v32_encoder": enc_name, "bos_token": BOS, "eos_token": EOS, "templates": templates,
           "counts": per_format, "cases": cases, "skipped": skipped}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases ({per_format}), skipped {len(skipped)}; renderer: {renderer_name}; "
          f"v32: {enc_name}")


if __name__ == "__main__":
    main()
