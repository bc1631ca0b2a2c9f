#pragma once
// The one way to open a tokenizer a user names (`--tokenizer` of tokenize and the tokenizer commands, a
// run's or a model's tokenizer for generate, chat and export), whatever holds it:
//
//   "byte", "gpt2"          the byte tokenizer; GPT-2's vocabulary (bundled in assets/)
//   FILE.json               a Hugging Face tokenizer.json
//   FILE.gguf               the tokenizer in a GGUF model's metadata (with its chat template)
//   a run directory         (run.json) the tokenizer the run keeps, with the checkpoint's special tokens
//                           and chat template when it was initialised from one
//   a token directory       (meta.json) the tokenizer its data was written with
//   any other directory     tokenizer.json (+ tokenizer_config.json, generation_config.json), or GPT-2's
//                           encoder.json + vocab.bpe
//   org/name[@revision]     when no such path exists: that checkpoint's directory in the local Hugging Face
//                           cache (runs/hub_cache.h)
//
// Errors name the path and say which of these it could have been.
#include <filesystem>
#include <string>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/runs/model_source.h"

namespace dew::runs {

// A spec that names a model (a run directory, a .gguf file, a Hugging Face checkpoint directory) is resolved
// as MODEL is (model_source.h) and opened as below; the other forms as the list above says.
data::PretrainedTokenizer open_tokenizer(const std::string& spec);
// The tokenizer of a MODEL resolved once: a run's own copy (from the run.json read when it was resolved), a
// GGUF file's metadata, a Hugging Face directory's tokenizer files. Nothing is probed or read again.
data::PretrainedTokenizer open_tokenizer(const ModelSource& source);

// The tokenizer a run keeps: run.json's `tokenizer` spec ("byte" or a file under the run directory), with the
// checkpoint's special tokens and chat template when they were kept beside it (tokenizer_config.json).
data::PretrainedTokenizer open_run_tokenizer(const std::filesystem::path& run_dir, const std::string& spec);

// A bare Tokenizer as a PretrainedTokenizer: its EOS is the one stop id, no chat template.
data::PretrainedTokenizer plain_tokenizer(std::unique_ptr<data::Tokenizer> tokenizer);

}  // namespace dew::runs
