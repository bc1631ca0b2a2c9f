"""Reference ids and masks for dew's chat, preference and prompt data (src/dew/data/chat/), from TRL.

Writes under tests/fixtures/chat_data/:
  tokenizer/      a small SmolLM2-style tokenizer that always ships with the tests: the byte-level BPE of
                  tests/fixtures/tokenizers/smollm_style/tokenizer.json (1,200 ids, <|endoftext|>,
                  <|im_start|>, <|im_end|> as ids 0-2) saved by transformers with SmolLM2-135M-Instruct's
                  special tokens and its real chat template (tests/fixtures/chat_templates/smollm2.json).
  masks.json      for each of two ChatML templates and a few conversations (system/user/assistant,
                  multi-turn without a system message, tool messages, text whose merges meet the
                  template's newlines): the rendered text, its ids, and TRL's assistant mask, i.e.
                  trl.data_utils._tokenize(tokenizer, messages, return_assistant_tokens_mask=True,
                  chat_template=TRAINING_TEMPLATE) as SFTTrainer(assistant_only_loss=True) calls it.
                    - "qwen2_5": TRL's own generation-tagged template trl/chat_templates/qwen2_5_training.jinja
                      (dew renders the original qwen2_5.jinja; TRL says the two differ only by the tags).
                    - "smollm2": TRL ships no training template for SmolLM2, so this script adds the tags
                      itself, placed where TRL places them in its ChatML templates: after
                      '<|im_start|>assistant', around '\\n' + content + '<|im_end|>\\n'.
                  When ~/.cache/dew/models/SmolLM2-135M-Instruct.Q4_1.gguf exists (scripts/fetch_models.sh),
                  "smollm2_gguf" holds the same for the real 49,152-id tokenizer (tests skip it otherwise),
                  for the first three conversations: the fourth's "\n\n1." is encoded "\n", "\n", "1" by
                  transformers' GGUF-built tokenizer but "\n\n", "1" by dew's GGUF tokenizer and by the
                  tokenizers library with SmolLM2's Digits + ByteLevel pre-tokenizer (the committed fixture
                  tokenizer above, whose ids for it match dew's) -- a tokenizer question outside this fixture.
  preference.json TRL DPOTrainer._prepare_dataset's prompt_ids / chosen_ids / rejected_ids for one standard
                  (strings) and one conversational preference pair, and TRL's ids for a string prompt and a
                  conversational prompt (trl.data_utils._tokenize, with add_generation_prompt for messages).

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_chat_data_fixtures.py
Deterministic; nothing is downloaded.
"""
import json
import os
import pathlib
import shutil
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402
from trl.data_utils import _tokenize  # noqa: E402
from trl.trainer.dpo_trainer import DPOTrainer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "chat_data"
TRL_TEMPLATES = pathlib.Path(trl.__file__).parent / "chat_templates"
CACHE = pathlib.Path(os.environ.get("DEW_CACHE", pathlib.Path.home() / ".cache" / "dew"))
SMOLLM2_GGUF = pathlib.Path(os.environ.get("DEW_MODELS", CACHE / "models")) / "SmolLM2-135M-Instruct.Q4_1.gguf"

SMOLLM2_TEMPLATE = json.loads((ROOT / "tests/fixtures/chat_templates/smollm2.json").read_text())["template"]
# SmolLM2's template with TRL-style {% generation %} tags (see the docstring).
SMOLLM2_TRAINING = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant' }}{% generation %}"
    "{{ '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endgeneration %}"
    "{% else %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "What is the capital of France?"},
     {"role": "assistant", "content": "Paris."}],
    [{"role": "user", "content": "Count to 3."},
     {"role": "assistant", "content": "1, 2, 3"},
     {"role": "user", "content": "And back?"},
     {"role": "assistant", "content": "3, 2, 1."}],
    [{"role": "user", "content": "What is 12 * 7? Use the tool."},
     {"role": "assistant", "content": "Calling multiply(12, 7)."},
     {"role": "tool", "content": "84"},
     {"role": "tool", "content": "(checked)"},
     {"role": "assistant", "content": "12 * 7 = 84."}],
    [{"role": "system", "content": "Answer in lists.\n"},
     {"role": "user", "content": " leading space, café naïve"},
     {"role": "assistant", "content": "Sure:\n\n1. one\n2. two\n"}],
]


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def make_tokenizer():
    directory = OUT / "tokenizer"
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(ROOT / "tests/fixtures/tokenizers/smollm_style/tokenizer.json"),
        bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|im_end|>", unk_token="<|endoftext|>")
    tok.chat_template = SMOLLM2_TEMPLATE
    tok.save_pretrained(str(directory))
    return AutoTokenizer.from_pretrained(str(directory))


def mask_cases(tok, template, training_template, conversations=CONVERSATIONS):
    cases = []
    for messages in conversations:
        text = tok.apply_chat_template(messages, tokenize=False, chat_template=template)
        out = _tokenize(tok, messages, return_assistant_tokens_mask=True, chat_template=training_template)
        assert tok.apply_chat_template(messages, tokenize=False, chat_template=training_template) == text
        cases.append({"messages": messages, "text": text, "ids": list(out["input_ids"]),
                      "assistant_masks": list(out["assistant_masks"])})
    return cases


def preference(tok):
    """TRL's DPOTrainer._prepare_dataset itself, on a one-row dataset (self only supplies _tokenizer)."""
    fake_self = types.SimpleNamespace(_tokenizer=tok)
    args = types.SimpleNamespace(dataset_num_proc=None, max_length=None, truncation_mode="keep_start")
    pairs = {
        "standard": {"prompt": "The sky is", "chosen": " blue.", "rejected": " green, 42 times."},
        "conversational": {
            "prompt": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Is the sky blue?"}],
            "chosen": [{"role": "assistant", "content": "Yes, on a clear day."}],
            "rejected": [{"role": "assistant", "content": "No."}]},
    }
    out = {}
    for name, pair in pairs.items():
        row = DPOTrainer._prepare_dataset(fake_self, Dataset.from_list([pair]), tok, args, name)[0]
        out[name] = {"pair": pair, "prompt_ids": row["prompt_ids"], "chosen_ids": row["chosen_ids"],
                     "rejected_ids": row["rejected_ids"]}
    prompts = {
        "standard": {"prompt": "Question: 2 + 2 =", "ids": None},
        "conversational": {"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "ids": None},
    }
    prompts["standard"]["ids"] = list(_tokenize(tok, prompts["standard"]["prompt"])["input_ids"])
    prompts["conversational"]["ids"] = list(
        _tokenize(tok, prompts["conversational"]["prompt"], add_generation_prompt=True)["input_ids"])
    return {"made_by": f"tools/reference/make_chat_data_fixtures.py, trl {trl.__version__}",
            "pairs": out, "prompts": prompts}


def main():
    tok = make_tokenizer()
    qwen = (TRL_TEMPLATES / "qwen2_5.jinja").read_text()
    qwen_training = (TRL_TEMPLATES / "qwen2_5_training.jinja").read_text()
    masks = {
        "made_by": f"tools/reference/make_chat_data_fixtures.py, trl {trl.__version__}",
        "templates": {
            "smollm2": {"template": SMOLLM2_TEMPLATE, "training_template": SMOLLM2_TRAINING,
                        "tags_by": "make_chat_data_fixtures.py, placed as in TRL's ChatML training templates",
                        "cases": mask_cases(tok, SMOLLM2_TEMPLATE, SMOLLM2_TRAINING)},
            "qwen2_5": {"template": qwen, "training_template": qwen_training,
                        "tags_by": "TRL (trl/chat_templates/qwen2_5_training.jinja)",
                        "cases": mask_cases(tok, qwen, qwen_training)},
        },
    }
    if SMOLLM2_GGUF.exists():
        real = AutoTokenizer.from_pretrained(str(SMOLLM2_GGUF.parent), gguf_file=SMOLLM2_GGUF.name)
        masks["templates"]["smollm2_gguf"] = {
            "template": SMOLLM2_TEMPLATE, "training_template": SMOLLM2_TRAINING, "gguf": SMOLLM2_GGUF.name,
            "tags_by": "make_chat_data_fixtures.py", "cases": mask_cases(real, SMOLLM2_TEMPLATE, SMOLLM2_TRAINING, CONVERSATIONS[:3])}
    else:
        print(f"{SMOLLM2_GGUF} is missing: smollm2_gguf cases left out (run scripts/fetch_models.sh)")
    write_json(OUT / "masks.json", masks)
    write_json(OUT / "preference.json", preference(tok))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
