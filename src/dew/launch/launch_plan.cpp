#include "dew/launch/launch_plan.h"

#include "dew/launch/free_port.h"
#include "dew/launch/shell_quote.h"

namespace dew::launch {

namespace {

std::vector<EnvVar> with_extra(std::vector<EnvVar> environment, const std::vector<EnvVar>& extra) {
  environment.insert(environment.end(), extra.begin(), extra.end());
  return environment;
}

// `user@node01` is ssh's spelling; the training processes need the machine.
std::string machine_of(const std::string& host) {
  auto at = host.rfind('@');
  return at == std::string::npos ? host : host.substr(at + 1);
}

int processes_on(const Host& host, int processes_per_host) {
  if (processes_per_host > 0) return processes_per_host;
  return host.slots > 0 ? host.slots : 1;
}

}  // namespace

std::vector<RankCommand> local_ranks(const LocalPlan& plan) {
  std::vector<RankCommand> ranks;
  for (int rank = 0; rank < plan.nproc; ++rank) {
    Contract contract{plan.master_addr, plan.master_port, rank, plan.nproc, rank, plan.nproc};
    ranks.push_back({rank, with_extra(contract_environment(contract), plan.extra), plan.command});
  }
  return ranks;
}

std::vector<RankCommand> ssh_ranks(const HostPlan& plan) {
  int world_size = 0;
  for (const auto& host : plan.hosts) world_size += processes_on(host, plan.processes_per_host);
  const std::string master_addr = plan.master_addr.empty() ? machine_of(plan.hosts.at(0).name) : plan.master_addr;
  std::vector<RankCommand> ranks;
  int rank = 0;
  for (const auto& host : plan.hosts) {
    const int local_world_size = processes_on(host, plan.processes_per_host);
    for (int local_rank = 0; local_rank < local_world_size; ++local_rank, ++rank) {
      Contract contract{master_addr, plan.master_port, rank, world_size, local_rank, local_world_size};
      // The remote side gets one string that its shell splits again: every word quoted for it. The
      // variables go through `env` rather than the shell's NAME=VALUE prefix, which csh-family login
      // shells do not have.
      std::vector<std::string> remote = {"env"};
      for (const auto& var : with_extra(contract_environment(contract), plan.extra)) {
        remote.push_back(var.name + "=" + var.value);
      }
      remote.insert(remote.end(), plan.command.begin(), plan.command.end());
      std::string script = "cd " + shell_quote(plan.directory) + " && " + shell_join(remote);
      // BatchMode: a password or host-key prompt would wait forever on a terminal nobody reads; it fails
      // instead, and the failure ends the launch like any other rank's.
      ranks.push_back({rank, {}, {"ssh", "-o", "BatchMode=yes", host.name, script}});
    }
  }
  return ranks;
}

std::vector<RankCommand> plan_ranks(const LaunchOptions& options, LaunchMode mode) {
  auto extra = parse_env_pairs(options.env);
  if (mode == LaunchMode::local) {
    LocalPlan plan;
    plan.nproc = *options.nproc;
    if (options.master_addr) plan.master_addr = *options.master_addr;
    // A port of the kernel's choosing, so parallel launches (tests, several jobs on one machine) do
    // not collide on a fixed one.
    plan.master_port = options.master_port ? *options.master_port : free_port();
    plan.extra = extra;
    plan.command = options.command;
    return local_ranks(plan);
  }
  HostPlan plan;
  plan.hosts = options.hosts ? parse_host_list(*options.hosts) : read_hostfile(*options.hostfile);
  plan.processes_per_host = options.processes_per_host.value_or(0);
  plan.master_addr = options.master_addr.value_or("");
  // torchrun's default: every machine must agree on the port without talking first.
  plan.master_port = options.master_port.value_or(29500);
  plan.directory = std::filesystem::current_path().string();
  plan.extra = extra;
  plan.command = options.command;
  return ssh_ranks(plan);
}

std::string command_line(const RankCommand& rank) {
  std::vector<std::string> words;
  if (!rank.environment.empty()) words.push_back("env");
  for (const auto& var : rank.environment) words.push_back(var.name + "=" + var.value);
  words.insert(words.end(), rank.argv.begin(), rank.argv.end());
  return shell_join(words);
}

}  // namespace dew::launch
