"""Reference numbers for dew's masked-diffusion (MDLM) objective, written independently of dew.

A tiny Llama-shaped decoder (transformers' LlamaForCausalLM, float32) is run with an all-visible attention
mask, which is dew's CausalTransformer with causal = false and no q/k norm. On a fixed batch, fixed times t
and a fixed mask, the MDLM continuous-time negative ELBO is computed from the formula of Sahoo et al. 2024
(log-linear schedule alpha(t) = 1 - (1 - eps) t, weight -alpha'(t) / (1 - alpha(t)) = 1 / t):

    loss_sum = sum over real, masked positions of (1 / t_row) * -log softmax(logits with the mask id at -inf)[token]
    nelbo    = loss_sum / (number of real tokens)

Row 1 ends in padding (segment id 0): its padded slots are neither keys nor scored. Writes under
tests/fixtures/mdlm/:
  config.json          dew's CausalTransformerConfig of the same model
  weights.safetensors  the state dict (Hugging Face Llama names = dew's)
  io.safetensors       text [2, S], segment_ids [2, S], t [2], is_masked [2, S] (uint8), masked_ids [2, S],
                       loss_sum, real_count, nelbo, correct (masked positions predicted exactly)
  grads.safetensors    d loss_sum / d parameter for every parameter

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_mdlm_fixtures.py
(torch 2.11, transformers 5.24 from PyPI). Deterministic: fixed seeds, float32, CPU, eager attention.
"""
import json
import pathlib

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "mdlm"
DATA_VOCAB, EMB, LAYERS, HEADS, KV_HEADS, HEAD_DIM, MLP, SEQ, PAD = 63, 32, 2, 4, 2, 8, 48, 12, 3
MASK = DATA_VOCAB  # the id after the data's last, as `dew train mdlm` chooses it
VOCAB = DATA_VOCAB + 1


def dew_config():
    return {
        "vocab_size": VOCAB, "emb_features": EMB, "num_layers": LAYERS, "num_heads": HEADS,
        "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "mlp": "swiglu", "mlp_features": MLP,
        "max_seq_len": 32, "rope_theta": 10000.0, "norm_eps": 1e-6, "qk_norm": False,
        "attention_bias": False, "tie_embeddings": False, "causal": False, "mask_token_id": MASK,
        "dtype": "float32", "param_dtype": "float32",
    }


def all_visible_mask(segments):
    """[B, 1, S, S] additive mask: every real key is visible to every query of the same row; padded keys
    are hidden (a padded query sees only itself, so its row of the softmax is defined)."""
    b, s = segments.shape
    allowed = (segments[:, None, :] != 0).expand(b, s, s).clone()
    allowed |= torch.eye(s, dtype=torch.bool)[None]
    mask = torch.zeros(b, 1, s, s)
    mask.masked_fill_(~allowed[:, None], float("-inf"))
    return mask


def logits_of(model, ids, segments):
    return model(input_ids=ids, attention_mask=all_visible_mask(segments)).logits.float()


def main():
    torch.manual_seed(2024)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=EMB, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=MLP, max_position_embeddings=32,
        rope_theta=10000.0, rms_norm_eps=1e-6, attention_bias=False, mlp_bias=False, hidden_act="silu",
        tie_word_embeddings=False, attn_implementation="eager", initializer_range=0.2))
    with torch.no_grad():  # norms away from one, so a misplaced norm weight shows up
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    model.eval()

    text = torch.randint(0, DATA_VOCAB, (2, SEQ))
    segments = torch.ones(2, SEQ, dtype=torch.long)
    segments[1, SEQ - PAD:] = 0
    text[1, SEQ - PAD:] = 0
    t = torch.tensor([0.3, 0.85])
    is_masked = (torch.rand(2, SEQ) < t[:, None]) & (segments != 0)
    is_masked[0, 0] = True  # at least one masked token in each row
    is_masked[1, 1] = True
    masked_ids = torch.where(is_masked, torch.full_like(text, MASK), text)

    # The all-visible mask really is bidirectional: the last token moves the first position's logits.
    other = masked_ids.clone()
    other[0, SEQ - 1] = (other[0, SEQ - 1] + 1) % DATA_VOCAB
    with torch.no_grad():
        assert not torch.allclose(logits_of(model, masked_ids, segments)[0, 0], logits_of(model, other, segments)[0, 0])

    logits = logits_of(model, masked_ids, segments)
    logits = logits.masked_fill(torch.arange(VOCAB) == MASK, float("-inf"))  # SUBS: the mask has no mass
    ce = -torch.log_softmax(logits, -1).gather(-1, text[..., None])[..., 0]
    weight = 1.0 / t  # loglinear: -alpha'(t) / (1 - alpha(t)) = (1 - eps) / ((1 - eps) t)
    loss_sum = (ce * weight[:, None] * is_masked).sum()
    real_count = (segments != 0).sum().float()
    correct = ((logits.argmax(-1) == text) & is_masked).sum().float()
    model.zero_grad()
    loss_sum.backward()

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.json").write_text(json.dumps(dew_config(), indent=2) + "\n")
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, OUT / "weights.safetensors")
    save_file({"text": text, "segment_ids": segments, "t": t, "is_masked": is_masked.to(torch.uint8),
               "masked_ids": masked_ids, "loss_sum": loss_sum.detach().reshape(1),
               "real_count": real_count.reshape(1), "nelbo": (loss_sum / real_count).detach().reshape(1),
               "correct": correct.reshape(1)}, OUT / "io.safetensors")
    save_file({k: p.grad.contiguous() for k, p in model.named_parameters()}, OUT / "grads.safetensors")
    print(f"loss_sum {loss_sum.item():.6f} nelbo {(loss_sum / real_count).item():.6f} masked {int(is_masked.sum())}")


if __name__ == "__main__":
    main()
