// The `dew` command: parses the command line and runs one subcommand. Errors from bad input reach the
// user as one clear message and exit status 1; nothing here aborts.
#include <cstdio>
#include <exception>

#include "dew/cli/commands.h"
#include "dew/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dew: train and run language models, diffusion models and JEPA encoders", "dew"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  dew::cli::add_version_command(app);
  dew::cli::add_tokenize_command(app);
  dew::cli::add_tokenizer_command(app);
  dew::cli::add_train_command(app);
  dew::cli::add_eval_command(app);
  dew::cli::add_generate_command(app);
  dew::cli::add_chat_command(app);
  dew::cli::add_export_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dew::Error& e) {
    std::fprintf(stderr, "dew: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dew: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
