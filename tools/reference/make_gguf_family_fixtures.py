"""GGUF files of dew's tiny Hugging Face family fixtures, written by llama.cpp's own converter, and the
transformers logits of the same models, for tests/interop_gguf_families_test.cpp.

For each FAMILY (gemma, gemma2, gemma3_text, phi3, gpt2, gpt_neox, olmo2, granite) the checkpoint
tests/fixtures/hf/FAMILY (tools/reference/make_hf_family_fixtures.py) is copied to a temporary directory with
  - a 128-token byte-level BPE tokenizer (tokenizer.json, the vocabulary's size; the fixtures have none and
    the converter needs one): ids 0-2 <pad> <s> </s>, 3-97 the printable ASCII bytes, 98-127 merges;
  - where llama.cpp computes the family differently from the fixture's config, the config changed to what
    llama.cpp computes (the weights untouched), so the GGUF and the transformers logits describe one model:
      gemma2, gemma3_text  query_pre_attn_scalar = head_dim (llama.cpp scales scores by head_dim^-0.5)
      gemma3_text          layer_types all sliding (the converter writes no pattern; llama.cpp's default
                           period 6 makes layers 0-4 of every 6 slide, i.e. all 4 of these)
      gpt_neox             hidden_act gelu_new (llama.cpp's GELU is the tanh form); GPTNeoXModel reads
                           hparams["rotary_pct"], which transformers 5 folds into rope_parameters, so the
                           driver sets it from rope_parameters.partial_rotary_factor
      gpt2                 n_ctx written (GPT2Model reads it); n_inner stays 48, and feed_forward_length is
                           patched to it after conversion (the converter writes 4 * n_embd, the width of every
                           published GPT-2)
and converted with vendor/llama.cpp/convert_hf_to_gguf.py from llama-cpp-python's sdist (the gguf-py beside
it on PYTHONPATH, as the converter inserts it), --outtype f32. The converter's vocabulary step is pointed at
the BPE tokenizer (set_vocab -> _set_vocab_gpt2, pre-tokenizer "gpt-2"), since Gemma's converter wants a
SentencePiece tokenizer.model the fixtures do not have. Writes under tests/fixtures/gguf_families/:
  FAMILY.gguf              the converter's output (f32)
  FAMILY.io.safetensors    ids [2, S] (the HF fixture's) and logits [2, S, V]: transformers on the changed copy

    tar xzf ~/.cache/dew/llama.cpp/llama_cpp_python-0.3.36.tar.gz -C /tmp
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-reference/bin/python tools/reference/make_gguf_family_fixtures.py \
        /tmp/llama_cpp_python-0.3.36/vendor/llama.cpp [FAMILY ...]
Deterministic: the weights are the committed fixtures', float32, CPU, eager attention.
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf"
OUT = ROOT / "tests" / "fixtures" / "gguf_families"
FAMILIES = ["gemma", "gemma2", "gemma3_text", "phi3", "gpt2", "gpt_neox", "olmo2", "granite"]
MERGES = ["t h", "e r", "i n", "a n", "o n", "r e", "e n", "a t", "o r", "e s", "t e", "a r", "s t", "i s",
          "a l", "i t", "o u", "l e", "n d", "h e", "i o", "c o", "d e", "r o", "m e", "n e", "v e", "c h",
          "l i", "s e"]


def byte_chars():
    """GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to chr(256 + n)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json():
    chars = byte_chars()
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for b in range(32, 127):
        vocab[chars[b]] = len(vocab)
    for merge in MERGES:
        vocab[merge.replace(" ", "")] = len(vocab)
    assert len(vocab) == 128, len(vocab)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in list(vocab.items())[:3]]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": MERGES},
    }


def llama_cpp_form(family, config):
    """The config changed to what llama.cpp computes for the family (see the module docstring)."""
    if family in ("gemma2", "gemma3_text"):
        config["query_pre_attn_scalar"] = config["head_dim"]
    if family == "gemma3_text":
        config["layer_types"] = ["sliding_attention"] * config["num_hidden_layers"]
    if family == "gpt_neox":
        config["hidden_act"] = "gelu_new"
    if family == "gpt2":
        config["n_ctx"] = config["n_positions"]
    return config


def prepare(family, work):
    shutil.copytree(HF / family, work)
    config = json.loads((work / "config.json").read_text())
    (work / "config.json").write_text(json.dumps(llama_cpp_form(family, config), indent=2))
    (work / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    (work / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer" if family == "phi3" else "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": False}))
    (work / "io.safetensors").unlink()


# Run inside the converter's process: the vocabulary through the BPE tokenizer, then its main().
DRIVER = r"""
import sys
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[1:]
sys.path.insert(0, LLAMA_CPP)
import conversion.base as base
base.TextModel.set_vocab = lambda self: self._set_vocab_gpt2()
base.TextModel._set_vocab_sentencepiece = lambda self, *a, **k: self._set_vocab_gpt2()
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
# transformers 5 folds config.json's rotary_pct into rope_parameters, where GPTNeoXModel does not look.
import conversion.gptneox as neox
set_params = neox.GPTNeoXModel.set_gguf_parameters
def neox_params(self):
    self.hparams.setdefault("rotary_pct", self.rope_parameters["partial_rotary_factor"])
    set_params(self)
neox.GPTNeoXModel.set_gguf_parameters = neox_params
import runpy
runpy.run_path(LLAMA_CPP + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def convert(llama_cpp, work, out):
    code = DRIVER.replace("LLAMA_CPP", repr(str(llama_cpp)))
    env = {"PYTHONPATH": str(llama_cpp / "gguf-py"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code, str(work), "--outfile", str(out), "--outtype", "f32"],
                   check=True, env=env, cwd=llama_cpp)


def patch_feed_forward(path, width):
    """GPT2Model writes feed_forward_length = 4 * n_embd; the fixture's MLP is n_inner wide."""
    sys.path.insert(0, str(LLAMA_CPP / "gguf-py"))
    import gguf
    reader = gguf.GGUFReader(path, "r+")
    field = reader.get_field("gpt2.feed_forward_length")
    field.parts[field.data[0]][0] = width


def reference_logits(family, work):
    import torch
    import transformers as T
    from safetensors.torch import load_file, save_file
    model = T.AutoModelForCausalLM.from_pretrained(work, attn_implementation="eager", dtype=torch.float32).eval()
    ids = load_file(HF / family / "io.safetensors")["ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    save_file({"ids": ids, "logits": logits.contiguous()}, OUT / f"{family}.io.safetensors")


def main():
    global LLAMA_CPP
    LLAMA_CPP = pathlib.Path(sys.argv[1]).resolve()
    OUT.mkdir(parents=True, exist_ok=True)
    for family in sys.argv[2:] or FAMILIES:
        with tempfile.TemporaryDirectory() as tmp:
            work = pathlib.Path(tmp) / family
            prepare(family, work)
            out = OUT / f"{family}.gguf"
            convert(LLAMA_CPP, work, out)
            if family == "gpt2":
                patch_feed_forward(out, json.loads((work / "config.json").read_text())["n_inner"])
            reference_logits(family, work)
            print(family, out.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
