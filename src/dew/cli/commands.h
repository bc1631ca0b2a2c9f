#pragma once
// Each subcommand lives in its own file and registers itself on the root app here.
#include <CLI/CLI.hpp>

namespace dew::cli {

void add_version_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_tokenizer_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace dew::cli
