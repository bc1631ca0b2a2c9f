// The `dew` command: parses the command line and runs one subcommand. Nothing here aborts; the exit
// status says how it ended:
//   0    success (and --help, --version)
//   1    a user error: a bad command line (unknown option, missing or malformed value) or bad input,
//        with one message naming what to change
//   70   an internal error (EX_SOFTWARE): a bug in dew, never the user's input
//   130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM
#include <cstdio>
#include <exception>

#include "dew/cli/commands.h"
#include "dew/core/error.h"
#include "dew/distributed/process_group.h"

namespace {
constexpr int kUserError = 1;
constexpr int kInternalError = 70;
}  // namespace

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
  dew::cli::add_sample_command(app);
  dew::cli::add_probe_command(app);
  dew::cli::add_export_command(app);
  dew::cli::add_launch_command(app);
  dew::cli::add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message and gives each kind of parse error its own status (100 and up); one
    // status for every user error is what scripts can test.
    return app.exit(e) == 0 ? 0 : kUserError;
  } catch (const dew::Error& e) {
    std::fprintf(stderr, "dew: error: %s\n", e.what());
    // The other processes of a multi-process job name this rank and its error instead of a lost connection.
    if (auto* group = dew::distributed::process_group()) group->report_failure(e.what());
    return kUserError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dew: internal error: %s\n", e.what());
    if (auto* group = dew::distributed::process_group()) group->report_failure(std::string("internal error: ") + e.what());
    return kInternalError;
  }
  return 0;
}
