#include "dew/interop/hf_quantization.h"

#include "dew/core/error.h"
#include "dew/formats/fp8_blocks.h"
#include "dew/interop/hf_config_reader.h"

namespace dew::interop {

namespace {

// The methods transformers loads that dew does not, each with what it stores, for the refusal.
struct Refused {
  const char* method;
  const char* what;
};
constexpr Refused kRefused[] = {
    {"gptq", "GPTQ int2-8 weights with group scales and zeros"},
    {"awq", "AWQ int4 weights with group scales and zeros"},
    {"bitsandbytes", "bitsandbytes int8 / nf4 / fp4 weights"},
    {"compressed-tensors", "compressed-tensors packed weights (int4/int8/fp8 schemes)"},
    {"aqlm", "AQLM additive codebooks"},
    {"hqq", "HQQ half-quadratic int weights"},
    {"eetq", "EETQ int8 weights"},
    {"quanto", "optimum-quanto int / float8 weights"},
    {"torchao", "torchao tensor subclasses"},
    {"bitnet", "BitNet ternary weights"},
    {"higgs", "HIGGS vector-quantized weights"},
    {"vptq", "VPTQ vector-quantized weights"},
    {"spqr", "SpQR sparse-quantized weights"},
    {"fbgemm_fp8", "FBGEMM per-row fp8 weights"},
    {"mxfp4", "MXFP4 weights (gpt-oss)"},
};

[[noreturn]] void refuse_method(const std::string& method, const std::string& source) {
  std::string what = "weights quantized that way";
  for (const auto& r : kRefused) {
    if (method == r.method) what = r.what;
  }
  dew::fail(source, ": quantization_config.quant_method is '", method, "' (", what,
            "); dew reads the fp8 block-scaled layout (quant_method fp8) only. Load the unquantized checkpoint this one "
            "was made from, or a GGUF of the model (F16, BF16, Q8_0, Q4_0..Q6_K)");
}

}  // namespace

std::optional<Fp8Quantization> read_quantization_config(const nlohmann::ordered_json& config, const std::string& source) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return std::nullopt;
  const auto& q = config["quantization_config"];
  if (!q.is_object()) dew::fail(source, ": quantization_config is ", q.dump(), "; expected an object");
  detail::HfConfigReader r(q, source + " quantization_config");
  const std::string method = r.string("quant_method", "");
  if (method.empty()) dew::fail(source, ": quantization_config has no quant_method; dew reads quant_method fp8");
  if (method != "fp8") refuse_method(method, source);
  Fp8Quantization out;
  const std::string fmt = r.string("fmt", "e4m3");
  if (fmt != "e4m3") {
    dew::fail(source, ": quantization_config.fmt is '", fmt, "'; dew reads fp8 checkpoints whose weights are e4m3 "
              "(the finegrained fp8 layout); use the unquantized checkpoint");
  }
  const std::string activations = r.string("activation_scheme", "dynamic");
  if (activations != "dynamic") {
    dew::fail(source, ": quantization_config.activation_scheme is '", activations, "'; dew reads 'dynamic' only "
              "(static input scales have no counterpart: dew computes activations unquantized)");
  }
  const std::string scale_fmt = r.string("scale_fmt", "float");
  if (scale_fmt != "float" && scale_fmt != "ue8m0") {
    dew::fail(source, ": quantization_config.scale_fmt is '", scale_fmt, "'; dew reads float (DeepSeek-V3) and ue8m0 "
              "(DeepSeek-V3.2) block scales");
  }
  if (const auto* size = r.get("weight_block_size")) {
    if (!size->is_array() || size->size() != 2 || !(*size)[0].is_number_integer() || !(*size)[1].is_number_integer() ||
        (*size)[0] != (*size)[1] || (*size)[0].get<std::int64_t>() <= 0) {
      dew::fail(source, ": quantization_config.weight_block_size is ", size->dump(), "; dew reads square blocks [B, B] "
                "with B > 0 (per-tensor and rectangular scales are other formats)");
    }
    out.block = (*size)[0].get<std::int64_t>();
  } else {
    dew::fail(source, ": quantization_config has no weight_block_size; dew reads the block-scaled fp8 layout "
              "([128, 128] in DeepSeek-V3 and Qwen3-FP8), not per-tensor fp8 scales");
  }
  if (r.string("expert_dtype", "fp8") != "fp8") {
    dew::fail(source, ": quantization_config.expert_dtype is '", r.string("expert_dtype", ""), "'; dew reads fp8 experts only");
  }
  // Inert: modules_to_not_convert, modules_to_convert (which weights are stored fp8: dew reads each by its
  // stored dtype), dequantize (dew always dequantizes).
  return out;
}

at::Tensor stored_weight(const formats::SafetensorsCheckpoint& weights, const std::string& name,
                         const std::optional<Fp8Quantization>& fp8) {
  const auto& dtype = weights.entry(name).dtype;
  if (!dtype.starts_with("F8_")) return weights.view(name);
  const std::string context = dew::str("'", weights.file_of(name).string(), "' tensor '", name, "'");
  if (!fp8) {
    dew::fail(context, " is stored as ", dtype, " but config.json has no quantization_config; an fp8 checkpoint "
              "names its layout there (quant_method fp8, weight_block_size)");
  }
  if (dtype != "F8_E4M3") {
    dew::fail(context, " is stored as ", dtype, "; dew reads fp8 weights stored as F8_E4M3 (the finegrained fp8 "
              "layout); use the unquantized checkpoint");
  }
  const std::string scale = name + "_scale_inv";
  if (!weights.has(scale)) {
    dew::fail(context, " is stored as F8_E4M3 but the checkpoint has no '", scale, "' (its block scales); is the "
              "checkpoint complete?");
  }
  const auto& scale_dtype = weights.entry(scale).dtype;
  if (scale_dtype != "F32" && scale_dtype != "BF16" && scale_dtype != "F8_E8M0") {
    dew::fail("'", weights.file_of(scale).string(), "' tensor '", scale, "' is stored as ", scale_dtype,
              "; fp8 block scales are F32, BF16 or F8_E8M0");
  }
  return formats::dequantize_fp8_blocks(weights.view(name), weights.view(scale), fp8->block, context);
}

}  // namespace dew::interop
