// `dew export MODEL DEST`: write a model where other runtimes read it.
//   --format hf    DEST/ config.json, model.safetensors (or shards + index), generation_config.json and the
//                  tokenizer files (tokenizer.json, tokenizer_config.json with the chat template):
//                  transformers' AutoModelForCausalLM and AutoTokenizer load it
//   --format gguf  DEST, one GGUF v3 file (F32, F16 or Q8_0 weights) with the tokenizer and chat template in
//                  its metadata, for llama.cpp and Ollama
//   --format peft  DEST/ adapter_config.json + adapter_model.safetensors: a LoRA run's adapters as PyPI peft
//                  stores them, to load onto the base model (init.from, exported as hf); hf and gguf merge them
// MODEL is a run directory (EMA weights unless --live), a Hugging Face directory or a GGUF file, so this also
// converts between the formats. Nothing is half-written: DEST appears complete or not at all. DEST may not
// overlap MODEL, and --force replaces only a previous export of the same format (check_existing_dest).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "dew/cli/commands.h"
#include "dew/cli/model_options.h"
#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_export.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_model.h"
#include "dew/interop/peft_adapter.h"
#include "dew/nn/dtype.h"
#include "dew/runs/model_source.h"
#include "dew/runs/run.h"

namespace dew::cli {

namespace {
struct ExportFlags {
  ModelFlags model{.device = "cpu"};
  std::string dest, format = "hf", type, model_type;
  std::int64_t max_shard_mb = 5000;
  bool force = false;
};

namespace fs = std::filesystem;

// The absolute path with symlinks and ".." resolved as far as it exists, without a trailing separator.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  if (ec) r = fs::absolute(p).lexically_normal();
  return r.filename().empty() ? r.parent_path() : r;
}

bool is_within(const fs::path& inner, const fs::path& outer) {
  auto [end_outer, end_inner] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return end_outer == outer.end();
}

// DEST may not be MODEL, lie inside it or contain it: replacing DEST would destroy the model (a run's
// checkpoints and run.json) before or after it is read.
void refuse_overlap(const fs::path& dest, const fs::path& model) {
  const fs::path d = resolved(dest), m = resolved(model);
  const char* how = d == m ? "is the model" : is_within(d, m) ? "is inside the model" : is_within(m, d) ? "contains the model" : nullptr;
  if (how) {
    fail("DEST '", dest.string(), "' ", how, " '", model.string(), "'; writing there would replace the model. "
         "Choose a DEST outside '", model.string(), "' (nothing was written)");
  }
}

// Whether `dir` is recognisably a Hugging Face checkpoint directory (a previous `dew export`, or one like it),
// the only kind of directory --force replaces. The rule: config.json and at least one *.safetensors file,
// nothing but regular files named like a checkpoint's (*.json, *.safetensors, *.txt, *.jinja, *.model, *.md;
// no hidden files, no subdirectories) and none of dew's own files (run.json, meta.json, state.json). So a
// run directory, a checkpoint step, a token directory or a user's folder of other things is never deleted.
// Returns why not, or "" when it is one.
std::string why_not_hf_export(const fs::path& dir) {
  bool config = false, weights = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string ext = it->path().extension().string();
    if (name == "run.json" || name == "meta.json" || name == "state.json") return "it holds dew's '" + name + "'";
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) return "it holds '" + name + "', which is not a regular file";
    if (name[0] == '.') return "it holds the hidden file '" + name + "'";
    if (ext != ".json" && ext != ".safetensors" && ext != ".txt" && ext != ".jinja" && ext != ".model" && ext != ".md") {
      return "it holds '" + name + "'";
    }
    config = config || name == "config.json";
    weights = weights || ext == ".safetensors";
  }
  if (ec) return "it cannot be listed: " + ec.message();
  if (!config) return "it has no config.json";
  if (!weights) return "it has no *.safetensors weights";
  return "";
}

// A previous peft export: adapter_config.json, adapter_model.safetensors and perhaps a README, nothing else.
std::string why_not_peft_export(const fs::path& dir) {
  bool config = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name != "adapter_config.json" && name != "adapter_model.safetensors" && name != "README.md") return "it holds '" + name + "'";
    config = config || name == "adapter_config.json";
  }
  if (ec) return "it cannot be listed: " + ec.message();
  return config ? "" : "it has no adapter_config.json";
}

bool starts_with_gguf_magic(const fs::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const bool gguf = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  std::fclose(f);
  return gguf;
}

// An existing DEST is replaced only with --force, and only when it is recognisably a previous export of the
// same format: an hf checkpoint directory (why_not_hf_export) or a GGUF file. An empty directory takes an hf
// export without --force. A GGUF export is one file, so a directory is never its DEST.
void check_existing_dest(const fs::path& dest, const std::string& format, bool force) {
  std::error_code ec;
  const auto status = fs::symlink_status(dest, ec);
  if (!fs::exists(status)) {
    check_no_file_in_the_way(dest, str("cannot write DEST '", dest.string(), "'"));
    return;
  }
  const bool is_dir = fs::is_directory(status);
  if (format == "gguf" && is_dir) {
    fail("DEST '", dest.string(), "' is a directory; a GGUF export is one file: give a file path such as '",
         (dest / "model.gguf").string(), "'");
  }
  if (format != "gguf" && is_dir && fs::is_empty(dest, ec)) return;
  if (!force) fail("DEST '", dest.string(), "' already exists; choose another path or pass --force to replace it");
  if (format == "peft") {
    const std::string why = is_dir ? why_not_peft_export(dest) : std::string("it is a file");
    if (!why.empty()) {
      fail("DEST '", dest.string(), "' is not a previous peft export (", why, "); --force replaces only a directory of "
           "adapter_config.json and adapter_model.safetensors. Choose another path");
    }
  } else if (format == "hf") {
    if (!is_dir) fail("DEST '", dest.string(), "' is a file, not a previous Hugging Face export; --force replaces only such a directory. Choose another path");
    if (auto why = why_not_hf_export(dest); !why.empty()) {
      fail("DEST '", dest.string(), "' is not a previous Hugging Face export (", why, "); --force replaces only a "
           "directory of config.json, *.safetensors and tokenizer files. Choose another path, or empty or remove it yourself");
    }
  } else if (!fs::is_regular_file(status) || !starts_with_gguf_magic(dest)) {
    fail("DEST '", dest.string(), "' is not a GGUF file; --force replaces only a previous GGUF export. Choose "
         "another path, or remove it yourself");
  }
}

// A LoRA run's adapters, unmerged, as a peft adapter directory (the run's optional verb, run_verbs.h).
void export_peft_adapter(const ModelFlags& model, const fs::path& dest) {
  const runs::ModelSource source = runs::resolve_model_source(model.model);
  if (source.kind != runs::ModelSourceKind::run) {
    fail("--format peft writes a LoRA run's adapters; '", model.model, "' is not a run directory");
  }
  const runs::LoraAdapters adapters = runs::open_run(source)->lora_adapters({.live = model.live, .step = model.step});
  // In the base's family's module names (GPT-2's transformer.h.0.attn.c_attn), which peft finds on that model.
  interop::write_peft_adapter(adapters.model, adapters.lora, adapters.base, dest,
                              adapters.model_type.empty() ? interop::hf_model_type_for(adapters.model->config()) : adapters.model_type);
  std::printf("wrote %s (peft LoRA adapter, rank %lld, base '%s') from run '%s' checkpoint '%s'\n", dest.c_str(),
              static_cast<long long>(adapters.lora.rank), adapters.base.c_str(), model.model.c_str(), adapters.checkpoint.c_str());
}

std::optional<std::int64_t> id_or_none(const std::optional<data::TokenId>& id) {
  return id ? std::optional<std::int64_t>(*id) : std::nullopt;
}
}  // namespace

void add_export_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  auto* cmd = app.add_subcommand("export", "Write a model as a Hugging Face checkpoint directory or a GGUF file");
  add_model_options(cmd, flags->model, /*with_device=*/false, /*with_dtype=*/false);  // export needs float weights
  cmd->add_option("dest", flags->dest, "output directory (hf) or file (gguf)")->required();
  cmd->add_option("--format", flags->format, "hf (default), gguf, or peft (a LoRA run's adapters alone)");
  cmd->add_option("--type", flags->type, "weights: hf float32|bfloat16|float16 (default: as stored); gguf f32|f16|q8_0 (default f16)");
  cmd->add_option("--model-type", flags->model_type, "Hugging Face family / GGUF architecture to write (default: the model's)");
  cmd->add_option("--max-shard-mb", flags->max_shard_mb, "hf: largest safetensors shard in MB (5000)");
  cmd->add_flag("--force", flags->force, "replace DEST if it is a previous export of the same format");

  cmd->callback([flags] {
    exit_on_interrupt();  // Ctrl-C leaves no partial export
    if (flags->format != "hf" && flags->format != "gguf" && flags->format != "peft") {
      fail("--format is '", flags->format, "'; use hf, gguf or peft");
    }
    if (flags->max_shard_mb <= 0) fail("--max-shard-mb must be positive, got ", flags->max_shard_mb);
    const fs::path dest = flags->dest;
    refuse_overlap(dest, flags->model.model);
    check_existing_dest(dest, flags->format, flags->force);
    // What an export killed before it finished left beside DEST (.DEST.partial-PID-N, .DEST.tmp-PID-N, ...).
    const fs::path named = dest.filename().empty() ? dest.parent_path() : dest;
    remove_stale_temporaries(named.parent_path().empty() ? fs::path(".") : named.parent_path(), named.filename().string());
    if (flags->format == "peft") {
      export_peft_adapter(flags->model, dest);
      return;
    }
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
