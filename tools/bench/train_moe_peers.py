"""The PyTorch-eager peer of `train_lm_bench --experts N`: transformers' own MixtralForCausalLM (eager
attention, its grouped-expert loop), the same sizes, batch and optimizer, timed as train_lm_peers.py times
its decoder. Prints one JSON line like train_lm_bench's (median tokens/s over the measured steps).

    python tools/bench/train_moe_peers.py --experts 8 --top-k 2 [--vocab --emb --layers --heads --kv-heads
        --mlp-features --seq --batch --steps --warmup --threads --seed]

Needs transformers (the reference venv: tools/reference/requirements.txt). The loss is the next-token cross
entropy plus router_aux_loss_coef (0.001, dew's default too) times transformers' load-balancing loss, as dew's
objective adds it.
"""
import argparse
import json
import statistics
import time

import torch
import transformers as T

from train_lm_peers import cosine_lr


def main():
    p = argparse.ArgumentParser()
    for flag, default in [("vocab", 4096), ("emb", 256), ("layers", 4), ("heads", 4), ("kv-heads", 0), ("mlp-features", 1024),
                          ("seq", 128), ("batch", 16), ("steps", 10), ("warmup", 3), ("threads", 0), ("seed", 0),
                          ("experts", 8), ("top-k", 2)]:
        p.add_argument("--" + flag, type=int, default=default)
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    config = T.MixtralConfig(vocab_size=a.vocab, hidden_size=a.emb, intermediate_size=a.mlp_features, num_hidden_layers=a.layers,
                             num_attention_heads=a.heads, num_key_value_heads=a.kv_heads or a.heads,
                             max_position_embeddings=max(256, a.seq), num_local_experts=a.experts, num_experts_per_tok=a.top_k,
                             rms_norm_eps=1e-6, tie_word_embeddings=False, output_router_logits=True,
                             router_aux_loss_coef=0.001, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config._attn_implementation = "eager"
    model = T.MixtralForCausalLM(config).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}], lr=3e-4,
                              betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(a.seed)
    batches = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g) for _ in range(4)]
    total = a.warmup + a.steps
    times, losses = [], []
    for step in range(total):
        rows = batches[step % 4]
        start = time.perf_counter()
        for group in optim.param_groups:
            group["lr"] = cosine_lr(step, total)
        out = model(input_ids=rows[:, :-1], labels=rows[:, 1:].contiguous(), shift_labels=rows[:, 1:].contiguous())
        optim.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        times.append(time.perf_counter() - start)
        losses.append(float(out.loss))
    step = statistics.median(times[a.warmup:])
    print(json.dumps({"impl": "transformers-mixtral-eager", "threads": torch.get_num_threads(),
                      "tokens_per_s": a.batch * a.seq / step, "step_s": step,
                      "parameters": sum(p.numel() for p in model.parameters()), "loss_first": losses[0], "loss_last": losses[-1]}))


if __name__ == "__main__":
    main()
