// `dew launch`: start the processes of a multi-process training run with torchrun's environment
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE): N on this machine, K per
// host over ssh, or as one task of srun. The logic is in src/dew/launch/ (torch-free); this file only
// maps flags onto it. docs/launch.md is the user's guide.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "dew/cli/commands.h"
#include "dew/launch/child_processes.h"
#include "dew/launch/launch_options.h"
#include "dew/launch/launch_plan.h"
#include "dew/launch/program.h"
#include "dew/launch/slurm_environment.h"

extern char** environ;

namespace dew::cli {
namespace {

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text = *entry;
    auto eq = text.find('=');
    if (eq != std::string::npos) out[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return out;
}

// As one task of srun: this process becomes the command, with the contract Slurm's variables give.
void run_slurm_task(const launch::LaunchOptions& options) {
  auto contract = launch::slurm_contract(current_environment(), options.master_addr, options.master_port);
  auto environment = launch::contract_environment(contract);
  auto extra = launch::parse_env_pairs(options.env);
  environment.insert(environment.end(), extra.begin(), extra.end());
  if (options.dry_run) {
    std::printf("%s\n", launch::command_line({contract.rank, environment, options.command}).c_str());
    return;
  }
  std::fflush(stdout);
  launch::replace_process(options.command, environment);
}

void run_launch(const launch::LaunchOptions& options) {
  const auto mode = launch::check_launch_options(options, std::getenv("SLURM_PROCID") != nullptr);
  if (mode == launch::LaunchMode::slurm) return run_slurm_task(options);
  const auto ranks = launch::plan_ranks(options, mode);
  if (options.dry_run) {
    for (const auto& rank : ranks) std::printf("%s\n", launch::command_line(rank).c_str());
    return;
  }
  std::fflush(stdout);  // the ranks' lines are written straight to the descriptors
  launch::SupervisorOptions supervisor;
  supervisor.grace_seconds = options.grace_seconds;
  int status = launch::run_ranks(ranks, supervisor);
  if (status != 0) std::exit(status);  // the first failing rank's status, for scripts and schedulers
}

constexpr const char* kFooter = R"(Every process gets torchrun's environment:
  MASTER_ADDR, MASTER_PORT   where rank 0 listens (local: 127.0.0.1 and a free port)
  RANK, WORLD_SIZE           this process's index over all hosts, and how many there are
  LOCAL_RANK, LOCAL_WORLD_SIZE   its index on this host (the GPU to use), and how many run here
Output lines come out prefixed "[rank R] ". The first rank that fails stops the others (SIGTERM,
SIGKILL after --grace-seconds) and sets the exit status; SIGINT/SIGTERM are passed to every rank.
Under srun (--slurm), RANK/WORLD_SIZE/LOCAL_* come from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and the
tasks on this node; MASTER_ADDR is the step's first node; MASTER_PORT is MASTER_PORT if set, else
15000 + SLURM_JOB_ID % 20000.
Examples:
  dew launch --nproc 4 -- dew train lm --data tokens --out runs/a
  dew launch --hostfile hosts.txt --processes-per-host 8 -- dew train lm --data tokens --out runs/a
  srun dew launch --slurm -- dew train lm --data tokens --out runs/a
See docs/launch.md.)";

}  // namespace

void add_launch_command(CLI::App& app) {
  auto options = std::make_shared<launch::LaunchOptions>();
  auto* cmd = app.add_subcommand("launch", "Start a multi-process training run: N local processes, K per host over ssh, or a task of srun");
  cmd->add_option("--nproc", options->nproc, "processes on this machine");
  cmd->add_option("--hosts", options->hosts, "machines to start processes on over ssh, comma-separated (h1,h2)");
  cmd->add_option("--hostfile", options->hostfile, "file with one host per line ('node01 slots=4'; # comments)");
  cmd->add_option("--processes-per-host", options->processes_per_host,
                  "processes on each host (default: the hostfile's slots, else 1)");
  cmd->add_option("--master-addr", options->master_addr,
                  "host of rank 0 (default: 127.0.0.1 locally, the first host over ssh, the step's first node under Slurm)");
  cmd->add_option("--master-port", options->master_port,
                  "rendezvous port (default: a free port locally, 29500 over ssh, MASTER_PORT or 15000 + SLURM_JOB_ID % 20000 under Slurm)");
  // One KEY=VALUE per --env: a greedy vector would swallow the command's first word.
  cmd->add_option("--env", options->env, "KEY=VALUE set for every process (repeatable)")->allow_extra_args(false);
  cmd->add_option("--grace-seconds", options->grace_seconds,
                  "after a failure or a signal, seconds between SIGTERM and SIGKILL (default 30)");
  cmd->add_flag("--slurm", options->slurm, "run as one task of srun (automatic when SLURM_PROCID is set and no --nproc/--hosts)");
  cmd->add_flag("--dry-run", options->dry_run, "print the command line of every process (shell-quoted) and start nothing");
  cmd->add_option("command", options->command, "the command every process runs, after --");
  cmd->footer(kFooter);
  cmd->callback([options] { run_launch(*options); });
}

}  // namespace dew::cli
