#pragma once
// How a Hugging Face family stores dew's decoder parameters. dew's parameters carry Llama's names
// (nn/causal_transformer.h); most families store exactly those, some rename them (LLaDA, GPT-2, GPT-NeoX)
// and some fuse several of them into one tensor:
//   concat        the parts stacked along dim 0 (Phi-3's qkv_proj = [q; k; v], gate_up_proj = [gate; up])
//   conv1d        GPT-2's Conv1D: the parts stacked along dim 0 and the matrix transposed ([in, out]; biases
//                 are only stacked)
//   per_head_qkv  GPT-NeoX's query_key_value: for each head its q, k and v rows in turn ([heads, 3, head_dim, in])
//   expert_slice  the other way round: one stored tensor is a block of one grouped dew parameter, rows
//                 [row_begin, row_begin + rows) of expert `expert` (Mixtral's experts.E.w1 is the gate rows of
//                 mlp.experts.gate_up_proj[E], w3 its up rows, w2 all of down_proj[E]; Qwen-MoE's
//                 experts.E.{gate,up,down}_proj the same). transformers 5.24 keeps the experts grouped in
//                 memory, reads both layouts and writes this per-expert one.
// load_hf_model splits stored tensors into parameters with this table and save_hf_model fuses them back, so
// an export has the family's own layout.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dew::interop {

enum class Fuse { none, concat, conv1d, per_head_qkv, expert_slice };

struct StoredTensor {
  std::string name;                // in the checkpoint
  std::vector<std::string> parts;  // dew parameter names, in stored order
  Fuse fuse = Fuse::none;
  std::int64_t heads = 0;  // per_head_qkv: the attention heads
  std::int64_t expert = 0, row_begin = 0, rows = 0;  // expert_slice: the block of parts[0] it holds
};

// How a mixture-of-experts model's grouped expert weights are stored: per expert (what save_pretrained
// writes, and what dew writes) or grouped under dew's (transformers' in-memory) names.
struct ExpertStorage {
  std::int64_t experts = 0, features = 0;  // 0 experts: a dense model
  bool grouped = false;
};

struct HfTensorLayout {
  std::vector<StoredTensor> tensors;  // every dew parameter in exactly one entry
  std::string embedding, head;        // stored names of the token embedding and the output head
  // A prefix some checkpoints of the family leave off (GPT-2's published weights are GPT2Model's: wte.weight,
  // not transformer.wte.weight); empty when none.
  std::string optional_prefix;
};

// The layout of `family` (dew's family name) for a model with these parameters (parameter_map's names).
HfTensorLayout hf_tensor_layout(const std::string& family, const std::vector<std::string>& dew_names, std::int64_t num_layers,
                                std::int64_t num_heads, const ExpertStorage& experts = {});

// The part of `param` (the entry's one part) an expert_slice entry holds, as a view; `param` itself otherwise.
at::Tensor stored_block(const StoredTensor& entry, const at::Tensor& param);

// A tensor the family's checkpoints may carry that transformers recomputes and dew ignores: rotary
// inv_freq buffers, GPT-2's and GPT-NeoX's causal-mask buffers (attn.bias, attn.masked_bias).
bool hf_ignorable_tensor(const std::string& family, const std::string& stored_name);

// The stored tensor's shape for parts of these shapes.
std::vector<std::int64_t> fused_shape(const StoredTensor& entry, const std::vector<std::vector<std::int64_t>>& part_shapes);
// The stored tensor -> its parts (views where the layout allows), of the shapes given.
std::vector<at::Tensor> split_fused(const StoredTensor& entry, const at::Tensor& stored,
                                    const std::vector<std::vector<std::int64_t>>& part_shapes);
// The parts -> the stored tensor (contiguous).
at::Tensor fuse_parts(const StoredTensor& entry, const std::vector<at::Tensor>& parts);

}  // namespace dew::interop
