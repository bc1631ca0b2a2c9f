#!/usr/bin/env python3
"""Reference numbers for dew's DPO and GRPO losses (tests/post_training_losses_test.cpp), produced by TRL's
own trainer code on fixed random log-probabilities and rewards, in float64.

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_post_training_fixtures.py

Writes tests/fixtures/post_training/:
  dpo.json   per-token policy log-probabilities [2N, T] (rows 0..N-1 chosen, N..2N-1 rejected; zero outside
             the completion), the completion mask [2N, T] over those positions, the reference's summed
             log-probabilities per pair, and cases {beta, loss, label_smoothing} with TRL's loss (the mean
             over pairs), the gradient of that loss with respect to every per-token log-probability, and the
             metrics TRL logs (rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins,
             logps/chosen, logps/rejected).
  grpo.json  rewards [P * G] (one group with all rewards equal), TRL's advantages for scale_rewards =
             group | batch | none, per-token policy / behaviour / reference log-probabilities [P * G, T] and a
             completion mask, and cases {beta, epsilon, epsilon_high} with TRL's "bnpo" loss (sum of
             per-token losses over completion tokens / number of completion tokens), its gradient with
             respect to the policy log-probabilities, and its "kl" and "clip_ratio/region_mean" metrics.

Which TRL code made the numbers (TRL version recorded in each file as "trl_version"):
  * DPO: trl.trainer.dpo_trainer.DPOTrainer._compute_loss, called unbound on a SimpleNamespace that holds
    the attributes it reads; its model is a stub whose outputs.log_probs are the fixed per-token
    log-probabilities (what TRL's fused LM head returns: zero where the label is -100), and the reference
    log-probabilities come in precomputed (precompute_ref_logps=True). loss_type "sigmoid", "ipo", "hinge".
    TRL 1.x's "sigmoid" no longer takes label_smoothing; the conservative-DPO form dew implements,
    -(1 - e) logsigmoid(beta d) - e logsigmoid(-beta d), survives in TRL as loss_type "aot", which sorts the
    batch's log-ratios before applying it -- with one pair per call the sort is the identity, so the
    label-smoothed cases call _compute_loss once per pair with loss_type "aot" and average (losses, gradients
    and metrics are all means over pairs, so averaging single-pair calls equals the batch).
  * GRPO advantages: the expression in trl.trainer.grpo_trainer.GRPOTrainer._generate_and_score_completions
    ("sum_then_normalize" branch), reproduced here line for line around TRL's own trl.trainer.utils.nanstd
    (the method itself needs generation and reward models).
  * GRPO loss: trl.trainer.grpo_trainer.GRPOTrainer._compute_loss, called unbound on a SimpleNamespace with
    loss_type "bnpo", importance_sampling_level "token", and _get_per_token_logps_and_entropies stubbed to
    return the fixed policy log-probabilities (a leaf tensor, so backward gives TRL's gradient).
"""
import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch
import trl
from trl.trainer.dpo_trainer import DPOTrainer
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.utils import nanstd

OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "post_training"
DPO_METRICS = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
               "logps/rejected"]


def identity(x, *args, **kwargs):
    return x


def fake_accelerator():
    return SimpleNamespace(device=torch.device("cpu"), gather_for_metrics=identity, gather=identity,
                           reduce=identity, num_processes=1, sync_gradients=True)


# ---- DPO ----------------------------------------------------------------------------------------------
def dpo_call(per_token, mask, ref_chosen, ref_rejected, beta, loss_type, label_smoothing):
    """TRL's DPOTrainer._compute_loss on fixed per-token log-probabilities [2n, T] (masked)."""
    leaf = per_token.clone().requires_grad_(True)
    rows, T = per_token.shape

    def model(**kwargs):
        z = torch.zeros(rows, T, dtype=torch.float64)
        return SimpleNamespace(log_probs=leaf * mask, entropy=z, mean_logits=z, is_top1=torch.zeros_like(mask).bool(),
                               log_sum_sq_probs=z)

    model.training = True
    me = SimpleNamespace(
        model=model, accelerator=fake_accelerator(), aux_loss_enabled=False, ld_alpha=None, precompute_ref_logps=True,
        f_divergence_type="reverse_kl", loss_types=[loss_type], loss_weights=[1.0], beta=beta,
        label_smoothing=label_smoothing, use_weighting=False, _metrics={"train": defaultdict(list)},
        _total_train_tokens=0, _tp_size=1, args=SimpleNamespace())
    # input_ids carry one prompt token before the T scored positions: completion_mask[..., 1:] is `mask`.
    full_mask = torch.cat([torch.zeros(rows, 1, dtype=torch.int64), mask.to(torch.int64)], dim=1)
    inputs = {"input_ids": torch.ones(rows, T + 1, dtype=torch.int64), "attention_mask": torch.ones(rows, T + 1),
              "completion_mask": full_mask, "ref_chosen_logps": ref_chosen, "ref_rejected_logps": ref_rejected}
    loss = DPOTrainer._compute_loss(me, model, inputs, return_outputs=False)
    loss.backward()
    metrics = {name: me._metrics["train"][name][-1] for name in DPO_METRICS}
    return loss.item(), leaf.grad, metrics


def make_dpo(gen):
    N, T = 6, 7
    per_token = -torch.rand(2 * N, T, generator=gen, dtype=torch.float64) * 3.0
    lengths = torch.tensor([7, 3, 5, 1, 6, 4, 2, 7, 5, 3, 6, 4])
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    per_token = per_token * mask
    sums = per_token.sum(1)
    # Reference logps near the policy's, so log-ratios are O(1) and some pairs prefer the rejected answer.
    ref = sums + torch.randn(2 * N, generator=gen, dtype=torch.float64) * 1.5
    ref_chosen, ref_rejected = ref[:N].clone(), ref[N:].clone()
    cases = []
    for beta, loss_type, smoothing in [(0.1, "sigmoid", 0.0), (0.5, "sigmoid", 0.0), (0.5, "sigmoid", 0.1),
                                       (0.1, "ipo", 0.0), (0.3, "hinge", 0.0)]:
        if smoothing == 0.0:
            loss, grad, metrics = dpo_call(per_token, mask, ref_chosen, ref_rejected, beta, loss_type, 0.0)
        else:  # conservative DPO through TRL's "aot", one pair per call (see the docstring)
            loss, grad, metrics = 0.0, torch.zeros_like(per_token), {name: 0.0 for name in DPO_METRICS}
            for i in range(N):
                rows = [i, N + i]
                l, g, m = dpo_call(per_token[rows], mask[rows], ref_chosen[i:i + 1], ref_rejected[i:i + 1], beta,
                                   "aot", smoothing)
                loss += l / N
                grad[rows] += g / N
                for name in DPO_METRICS:
                    metrics[name] += m[name] / N
        cases.append({"beta": beta, "loss": loss_type, "label_smoothing": smoothing, "expected_loss": loss,
                      "expected_grad": grad.tolist(), "expected_metrics": metrics})
    return {"trl_version": trl.__version__, "pairs": N, "per_token_logps": per_token.tolist(), "mask": mask.tolist(),
            "reference_chosen": ref_chosen.tolist(), "reference_rejected": ref_rejected.tolist(), "cases": cases}


# ---- GRPO ---------------------------------------------------------------------------------------------
def trl_advantages(rewards, num_generations, scale_rewards):
    """GRPOTrainer._generate_and_score_completions, "sum_then_normalize" branch, one reward function."""
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
        std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
    else:  # "batch"
        std_rewards = nanstd(rewards).expand_as(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def grpo_call(logp, old, ref, mask, advantages, beta, epsilon, epsilon_high):
    leaf = logp.clone().requires_grad_(True)
    B, T = logp.shape
    me = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (leaf, torch.zeros(B, T, dtype=torch.float64), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token", beta=beta,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None), loss_type="bnpo", epsilon_low=epsilon,
        epsilon_high=epsilon_high, use_vllm=False, vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True), current_gradient_accumulation_steps=1, _entropy_bonus_enabled=False,
        aux_loss_enabled=False, accelerator=fake_accelerator(), _metrics={"train": defaultdict(list)})
    inputs = {"prompt_ids": torch.ones(B, 2, dtype=torch.int64), "prompt_mask": torch.ones(B, 2, dtype=torch.int64),
              "completion_ids": torch.ones(B, T, dtype=torch.int64), "completion_mask": mask,
              "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ref}
    loss = GRPOTrainer._compute_loss(me, None, inputs)
    loss.backward()
    metrics = {"clip_ratio/region_mean": me._metrics["train"]["clip_ratio/region_mean"][-1]}
    if beta != 0.0:
        metrics["kl"] = me._metrics["train"]["kl"][-1]
    return loss.item(), leaf.grad, metrics


def make_grpo(gen):
    P, G, T = 3, 4, 6
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0,      # a correct/incorrect group
                            0.5, 0.5, 0.5, 0.5,      # all equal: zero advantage
                            0.3, -1.2, 2.5, 0.7], dtype=torch.float64)
    advantages = {scale: trl_advantages(rewards, G, scale).tolist() for scale in ["group", "batch", "none"]}
    B = P * G
    lengths = torch.tensor([6, 2, 4, 5, 1, 6, 3, 5, 6, 4, 2, 3])
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 2.0
    # Log-ratios of ~0.3 put a good share of tokens outside [1 - 0.2, 1 + 0.2] so clipping is exercised.
    logp = old + torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.3
    ref = old + torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.2
    group_adv = torch.tensor(advantages["group"], dtype=torch.float64)
    cases = []
    for beta, epsilon, epsilon_high in [(0.04, 0.2, 0.2), (0.1, 0.2, 0.28), (0.0, 0.1, 0.1)]:
        loss, grad, metrics = grpo_call(logp, old, ref, mask, group_adv, beta, epsilon, epsilon_high)
        cases.append({"beta": beta, "epsilon": epsilon, "epsilon_high": epsilon_high, "expected_loss": loss,
                      "expected_grad": grad.tolist(), "expected_metrics": metrics})
    return {"trl_version": trl.__version__, "group_size": G, "rewards": rewards.tolist(), "advantages": advantages,
            "logp": logp.tolist(), "old_logp": old.tolist(), "ref_logp": ref.tolist(), "mask": mask.tolist(),
            "cases": cases}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(20240611)
    for name, make in [("dpo.json", make_dpo), ("grpo.json", make_grpo)]:
        (OUT / name).write_text(json.dumps(make(gen), indent=1) + "\n")
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
