"""Reference numbers for dew's CausalTransformer and LM loss, from transformers' own model classes.

For two tiny decoders -- "qwen3" (the default dew decoder: q/k RMSNorm, tied embeddings) and "llama"
(no q/k norm, separate lm_head) -- writes under tests/fixtures/lm/NAME/:
  config.json          the dew CausalTransformer config of the same model
  weights.safetensors  the transformers state dict (Hugging Face names), float32
  io.safetensors       text [2, S+1] ids, logits [2, S, V] for the first S ids, loss (mean next-token CE)
  grads.safetensors    d loss / d parameter for every parameter
  adamw.json           losses of 10 AdamW steps on that batch (decay on matrices only), the settings used
  adamw_final.safetensors  parameters after those 10 steps

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_lm_fixtures.py
(torch 2.11.0, transformers 5.24.0: tools/reference/requirements.txt). Deterministic: fixed seeds, float32, CPU.
"""
import json
import pathlib

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "lm"
VOCAB, EMB, LAYERS, HEADS, KV_HEADS, HEAD_DIM, MLP, SEQ = 64, 32, 2, 4, 2, 8, 48, 10
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, steps=10)


def dew_config(qk_norm, tied):
    return {
        "vocab_size": VOCAB, "emb_features": EMB, "num_layers": LAYERS, "num_heads": HEADS,
        "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "mlp": "swiglu", "mlp_features": MLP,
        "max_seq_len": 32, "rope_theta": 10000.0, "layer_types": [], "kinds": {}, "norm_eps": 1e-6,
        "qk_norm": qk_norm, "attention_bias": False, "tie_embeddings": tied, "embedding_scale": 1.0,
        "final_logit_softcap": 0.0, "causal": True, "dtype": "float32", "param_dtype": "float32",
    }


def build(name):
    common = dict(vocab_size=VOCAB, hidden_size=EMB, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=MLP,
                  max_position_embeddings=32, rope_theta=10000.0, rms_norm_eps=1e-6, attention_bias=False,
                  hidden_act="silu", attn_implementation="eager")
    torch.manual_seed(1234)
    if name == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(tie_word_embeddings=True, use_sliding_window=False, **common))
        config = dew_config(qk_norm=True, tied=True)
    else:
        model = LlamaForCausalLM(LlamaConfig(tie_word_embeddings=False, mlp_bias=False, **common))
        config = dew_config(qk_norm=False, tied=False)
    # transformers initialises norms to one; perturb them so a misplaced norm weight shows up in the test.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.add_(0.1 * torch.randn_like(p))
    return model.float().eval(), config


def state(model, tied):
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if tied:
        sd.pop("lm_head.weight", None)
    return sd


def mean_ce(model, text):
    logits = model(input_ids=text[:, :-1]).logits.float()
    return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), text[:, 1:].reshape(-1))


def main():
    for name in ("qwen3", "llama"):
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        model, config = build(name)
        tied = config["tie_embeddings"]
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(state(model, tied), out / "weights.safetensors")

        generator = torch.Generator().manual_seed(99)
        text = torch.randint(0, VOCAB, (2, SEQ + 1), generator=generator)
        logits, loss = mean_ce(model, text)
        loss.backward()
        save_file({"text": text, "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)},
                  out / "io.safetensors")
        grads = {k: p.grad.detach().clone().contiguous() for k, p in model.named_parameters()}
        if tied:
            grads.pop("lm_head.weight", None)
        save_file(grads, out / "grads.safetensors")

        model.zero_grad()
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
        losses = []
        for _ in range(ADAMW["steps"]):
            opt.zero_grad()
            _, loss = mean_ce(model, text)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        (out / "adamw.json").write_text(json.dumps({"settings": ADAMW, "losses": losses}, indent=2) + "\n")
        save_file(state(model, tied), out / "adamw_final.safetensors")
        print(name, "loss", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main()
