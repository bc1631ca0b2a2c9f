// `dew export MODEL DEST`: write a model where other runtimes read it.
//   --format hf    DEST/ config.json, model.safetensors (or shards + index), generation_config.json and the
//                  tokenizer files (tokenizer.json, tokenizer_config.json with the chat template):
//                  transformers' AutoModelForCausalLM and AutoTokenizer load it
//   --format gguf  DEST, one GGUF v3 file (F32, F16 or Q8_0 weights) with the tokenizer and chat template in
//                  its metadata, for llama.cpp and Ollama
// MODEL is a run directory (EMA weights unless --live), a Hugging Face directory or a GGUF file, so this also
// converts between the formats. Nothing is half-written: DEST appears complete or not at all.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "dew/cli/commands.h"
#include "dew/cli/model_options.h"
#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_export.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/dtype.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

namespace {
struct ExportFlags {
  ModelFlags model{.device = "cpu"};
  std::string dest, format = "hf", type, model_type;
  std::int64_t max_shard_mb = 5000;
  bool force = false;
};

void refuse_existing(const std::filesystem::path& dest, bool force) {
  std::error_code ec;
  if (!force && std::filesystem::exists(dest, ec) &&
      !(std::filesystem::is_directory(dest, ec) && std::filesystem::is_empty(dest, ec))) {
    fail("DEST '", dest.string(), "' already exists; choose another path or pass --force to replace it");
  }
}

std::optional<std::int64_t> id_or_none(const std::optional<data::TokenId>& id) {
  return id ? std::optional<std::int64_t>(*id) : std::nullopt;
}
}  // namespace

void add_export_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  auto* cmd = app.add_subcommand("export", "Write a model as a Hugging Face checkpoint directory or a GGUF file");
  add_model_options(cmd, flags->model, /*with_device=*/false);
  cmd->add_option("dest", flags->dest, "output directory (hf) or file (gguf)")->required();
  cmd->add_option("--format", flags->format, "hf (default) or gguf");
  cmd->add_option("--type", flags->type, "weights: hf float32|bfloat16|float16 (default: as stored); gguf f32|f16|q8_0 (default f16)");
  cmd->add_option("--model-type", flags->model_type, "Hugging Face family / GGUF architecture to write (default: the model's)");
  cmd->add_option("--max-shard-mb", flags->max_shard_mb, "hf: largest safetensors shard in MB (5000)");
  cmd->add_flag("--force", flags->force, "replace DEST if it exists");

  cmd->callback([flags] {
    if (flags->format != "hf" && flags->format != "gguf") fail("--format is '", flags->format, "'; use hf or gguf");
    if (flags->max_shard_mb <= 0) fail("--max-shard-mb must be positive, got ", flags->max_shard_mb);
    const std::filesystem::path dest = flags->dest;
    refuse_existing(dest, flags->force);
    auto loaded = load_model(flags->model);
    const std::string model_type = flags->model_type.empty() ? loaded.model_type : flags->model_type;

    if (flags->format == "hf") {
      if (!flags->type.empty()) loaded.model->to(nn::parse_dtype(flags->type));
      AtomicDirectory out(dest);
      interop::HfExportOptions options{.bos_token_id = id_or_none(loaded.tokenizer.bos_id),
                                       .eos_token_id = id_or_none(loaded.tokenizer.eos_id),
                                       .pad_token_id = id_or_none(loaded.tokenizer.pad_id),
                                       .max_shard_bytes = flags->max_shard_mb * 1'000'000};
      interop::save_hf_model(loaded.model, model_type, out.path(), options);
      data::save_pretrained_tokenizer(loaded.tokenizer, out.path());
      out.commit();
    } else {
      const std::string type = flags->type.empty() ? "f16" : flags->type;
      formats::GgmlType ggml;
      if (type == "f32") ggml = formats::GgmlType::F32;
      else if (type == "f16") ggml = formats::GgmlType::F16;
      else if (type == "q8_0") ggml = formats::GgmlType::Q8_0;
      else fail("--type '", type, "' is not a GGUF export type; use f32, f16 or q8_0");
      loaded.model->to(at::kFloat);
      interop::save_gguf_model(loaded.model, loaded.tokenizer, model_type, dest, ggml);
    }
    std::printf("wrote %s (%s, %s) from %s\n", dest.c_str(), flags->format.c_str(), model_type.c_str(),
                loaded.description.c_str());
  });
}

}  // namespace dew::cli
