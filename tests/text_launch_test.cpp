// dew launch's planning, without starting anything (src/dew/launch/): shell quoting, hostfiles, the
// per-rank environment and command lines (local and ssh), option checks, and Slurm's variables.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dew/launch/environment_contract.h"
#include "dew/launch/free_port.h"
#include "dew/launch/hostfile.h"
#include "dew/launch/launch_options.h"
#include "dew/launch/launch_plan.h"
#include "dew/launch/shell_quote.h"
#include "dew/launch/slurm_environment.h"
#include "test_support.h"

namespace {
using namespace dew::launch;
using dew::test::error_of;
using dew::test::run_command;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string env_of(const RankCommand& rank) {
  std::string out;
  for (const auto& var : rank.environment) out += var.name + "=" + var.value + " ";
  return out;
}

TEST(LaunchQuote, PlainWordsStayReadableOthersAreSingleQuoted) {
  EXPECT_EQ(shell_quote("dew"), "dew");
  EXPECT_EQ(shell_quote("RANK=0"), "RANK=0");
  EXPECT_EQ(shell_quote("/path/to-file_1.json"), "/path/to-file_1.json");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("two words"), "'two words'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("=ls"), "'=ls'");  // zsh would expand a leading '='
  EXPECT_EQ(shell_join({"sh", "-c", "echo $RANK"}), "sh -c 'echo $RANK'");
}

TEST(LaunchQuote, EveryWordSurvivesARealShellByteForByte) {
  const std::vector<std::string> words = {"a b", "it's", "$HOME", "`id`", "\\n", "", "*", "new\nline",
                                          "=x", "~", "\"q\"", "a;b|c&d", "tab\there", "!bang", "'"};
  // printf prints each argument between < and >, so empty words and newlines are visible.
  auto r = run_command("sh -c " + shell_quote("printf '<%s>' " + shell_join(words)));
  std::string expected;
  for (const auto& word : words) expected += "<" + word + ">";
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, expected);
}

TEST(LaunchHostfile, HostsSlotsCommentsAndBlankLines) {
  auto hosts = parse_hostfile("# the cluster\n\nnode01 slots=4\n  node02   # spare\nalice@node03 slots=2 max_slots=8\n", "h.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node01");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].name, "node02");
  EXPECT_EQ(hosts[1].slots, 0);
  EXPECT_EQ(hosts[2].name, "alice@node03");
  EXPECT_EQ(hosts[2].slots, 2);
}

TEST(LaunchHostfile, ErrorsNameTheFileTheLineAndTheFix) {
  auto e = error_of([] { parse_hostfile("a\nb slots=0\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "hostfile 'h.txt' line 2")) << e;
  EXPECT_TRUE(contains(e, "slots='0'")) << e;
  e = error_of([] { parse_hostfile("a slots=x\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "line 1: slots='x' is not a positive whole number")) << e;
  e = error_of([] { parse_hostfile("a cpu=4\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "'cpu=4' is not understood; a line is 'HOST' or 'HOST slots=K'")) << e;
  e = error_of([] { parse_hostfile("a\n# x\na slots=2\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "line 3: host 'a' is listed twice")) << e;
  e = error_of([] { parse_hostfile("-oProxyCommand=x\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "starts with '-'")) << e;
  e = error_of([] { parse_hostfile("# nothing\n\n", "h.txt"); });
  EXPECT_TRUE(contains(e, "hostfile 'h.txt' names no host")) << e;
  e = error_of([] { read_hostfile("/nonexistent/hosts.txt"); });
  EXPECT_TRUE(contains(e, "cannot read --hostfile '/nonexistent/hosts.txt'")) << e;
}

TEST(LaunchHostfile, HostList) {
  auto hosts = parse_host_list("n1,bob@n2");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1].name, "bob@n2");
  EXPECT_TRUE(contains(error_of([] { parse_host_list("a,,b"); }), "--hosts 'a,,b' has an empty")) << "";
  EXPECT_TRUE(contains(error_of([] { parse_host_list("a,a"); }), "listed twice"));
  EXPECT_TRUE(contains(error_of([] { parse_host_list("-x"); }), "starts with '-'"));
}

TEST(LaunchEnv, PairsAreCheckedByName) {
  auto vars = parse_env_pairs({"NCCL_DEBUG=INFO", "A=1=2", "EMPTY="});
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[1].name, "A");
  EXPECT_EQ(vars[1].value, "1=2");
  EXPECT_EQ(vars[2].value, "");
  EXPECT_TRUE(contains(error_of([] { parse_env_pairs({"NOEQUALS"}); }), "--env 'NOEQUALS' has no '='; write KEY=VALUE"));
  EXPECT_TRUE(contains(error_of([] { parse_env_pairs({"1X=a"}); }), "'1X' is not a variable name"));
  EXPECT_TRUE(contains(error_of([] { parse_env_pairs({"A B=a"}); }), "is not a variable name"));
  EXPECT_TRUE(contains(error_of([] { parse_env_pairs({"RANK=3"}); }), "dew launch sets RANK itself"));
}

TEST(LaunchPlan, LocalRanksGetTheContractThenTheExtraVariables) {
  LocalPlan plan;
  plan.nproc = 3;
  plan.master_port = 29555;
  plan.extra = {{"OMP_NUM_THREADS", "1"}};
  plan.command = {"dew", "train", "lm", "--out", "runs/a b"};
  auto ranks = local_ranks(plan);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(env_of(ranks[2]),
            "MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 RANK=2 WORLD_SIZE=3 LOCAL_RANK=2 LOCAL_WORLD_SIZE=3 OMP_NUM_THREADS=1 ");
  EXPECT_EQ(ranks[2].argv, plan.command);
  EXPECT_EQ(command_line(ranks[1]),
            "env MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 RANK=1 WORLD_SIZE=3 LOCAL_RANK=1 LOCAL_WORLD_SIZE=3 "
            "OMP_NUM_THREADS=1 dew train lm --out 'runs/a b'");
}

TEST(LaunchPlan, SshRanksNumberHostsInOrderAndQuoteTwice) {
  HostPlan plan;
  plan.hosts = {{"alice@n1", 0}, {"n2", 0}};
  plan.processes_per_host = 2;
  plan.directory = "/work/my dir";
  plan.command = {"sh", "-c", "echo $RANK"};
  auto ranks = ssh_ranks(plan);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[3].rank, 3);
  EXPECT_TRUE(ranks[3].environment.empty());  // the remote side sets it
  ASSERT_EQ(ranks[3].argv.size(), 5u);
  EXPECT_EQ(ranks[3].argv[3], "n2");
  // rank = host index * K + local index; MASTER_ADDR the first host without its user.
  EXPECT_EQ(ranks[3].argv[4],
            "cd '/work/my dir' && env MASTER_ADDR=n1 MASTER_PORT=29500 RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 "
            "LOCAL_WORLD_SIZE=2 sh -c 'echo $RANK'");
  EXPECT_EQ(command_line(ranks[0]),
            "ssh -o BatchMode=yes alice@n1 'cd '\\''/work/my dir'\\'' && env MASTER_ADDR=n1 MASTER_PORT=29500 RANK=0 "
            "WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 sh -c '\\''echo $RANK'\\'''");
}

TEST(LaunchPlan, SlotsGiveEachHostItsCountUnlessOverridden) {
  HostPlan plan;
  plan.hosts = {{"a", 3}, {"b", 0}};
  plan.master_addr = "10.0.0.1";
  plan.master_port = 1234;
  plan.directory = "/d";
  plan.command = {"x"};
  auto ranks = ssh_ranks(plan);
  ASSERT_EQ(ranks.size(), 4u);  // 3 on a (slots), 1 on b (default)
  EXPECT_TRUE(contains(ranks[3].argv[4], "MASTER_ADDR=10.0.0.1 MASTER_PORT=1234 RANK=3 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1"))
      << ranks[3].argv[4];
  EXPECT_TRUE(contains(ranks[2].argv[4], "RANK=2 WORLD_SIZE=4 LOCAL_RANK=2 LOCAL_WORLD_SIZE=3")) << ranks[2].argv[4];
  plan.processes_per_host = 1;
  EXPECT_EQ(ssh_ranks(plan).size(), 2u);
}

TEST(LaunchPlan, RemoteCommandRunsAsWrittenThroughTwoShells) {
  HostPlan plan;
  plan.hosts = {{"h", 0}};
  plan.directory = "/";
  plan.extra = {{"X", "a 'b' $c"}};
  plan.command = {"sh", "-c", "printf '<%s>' \"$X\" \"$RANK\" \"$1\"", "arg0", "it's $HOME"};
  auto ranks = ssh_ranks(plan);
  // What ssh does with the last argument: the remote login shell runs it.
  auto r = run_command("sh -c " + shell_quote(ranks[0].argv[4]));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "<a 'b' $c><0><it's $HOME>");
}

TEST(LaunchPlan, FreePortIsAUsablePort) {
  int port = free_port();
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

LaunchOptions with_command() {
  LaunchOptions o;
  o.command = {"true"};
  return o;
}

TEST(LaunchOptionsCheck, ModesAndTheirConflicts) {
  auto o = with_command();
  o.nproc = 2;
  EXPECT_EQ(check_launch_options(o, false), LaunchMode::local);
  EXPECT_EQ(check_launch_options(o, true), LaunchMode::local);  // --nproc wins inside an allocation
  o = with_command();
  o.hosts = "a,b";
  EXPECT_EQ(check_launch_options(o, false), LaunchMode::ssh);
  o = with_command();
  EXPECT_EQ(check_launch_options(o, true), LaunchMode::slurm);  // SLURM_PROCID set, nothing else given
  o.slurm = true;
  EXPECT_EQ(check_launch_options(o, false), LaunchMode::slurm);

  auto error = [](auto change) {
    auto o = with_command();
    change(o);
    return error_of([&] { check_launch_options(o, false); });
  };
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.command.clear(); o.nproc = 2; }), "needs a command after '--'"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.nproc = 0; }), "--nproc 0 starts no process; give 1 or more"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.nproc = 2; o.hosts = "a"; }), "--nproc 2 is for processes on this machine"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.hosts = "a"; o.hostfile = "f"; }), "give one of them"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.slurm = true; o.nproc = 2; }), "--slurm takes the processes from srun"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.nproc = 2; o.processes_per_host = 2; }), "--processes-per-host 2 needs --hosts"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.hosts = "a"; o.processes_per_host = 0; }), "--processes-per-host 0 starts no process"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.nproc = 2; o.master_port = 70000; }), "--master-port 70000 is not a TCP port"));
  EXPECT_TRUE(contains(error([](LaunchOptions& o) { o.nproc = 2; o.grace_seconds = -1; }), "--grace-seconds -1"));
  EXPECT_TRUE(contains(error([](LaunchOptions&) {}), "needs --nproc N (processes on this machine), --hosts/--hostfile"));
}

TEST(LaunchSlurm, HostlistExpansionKeepsOrderAndZeroPadding) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_hostlist("node[01-04,07],gpu-a", "L"), (V{"node01", "node02", "node03", "node04", "node07", "gpu-a"}));
  EXPECT_EQ(expand_hostlist("a", "L"), (V{"a"}));
  EXPECT_EQ(expand_hostlist("n[9-11]", "L"), (V{"n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[008-010]", "L"), (V{"n008", "n009", "n010"}));
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[08-09],x[3]", "L"), (V{"rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09", "x3"}));
  EXPECT_TRUE(contains(error_of([] { expand_hostlist("n[1-", "SLURM_JOB_NODELIST"); }), "SLURM_JOB_NODELIST='n[1-' has an unclosed '['"));
  EXPECT_TRUE(contains(error_of([] { expand_hostlist("n[a-b]", "L"); }), "L='n[a-b]': 'a' is not a whole number"));
  EXPECT_TRUE(contains(error_of([] { expand_hostlist("n[3-1]", "L"); }), "range '3-1' is empty"));
  EXPECT_TRUE(contains(error_of([] { expand_hostlist("", "L"); }), "empty host name"));
  EXPECT_TRUE(contains(error_of([] { expand_hostlist("a]b", "L"); }), "unbalanced"));
}

TEST(LaunchSlurm, TasksPerNodeForms) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "T"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "T"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)", "T"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"2(x)", "x", "2(3)", "0", "2(x3", ""}) {
    EXPECT_TRUE(contains(error_of([&] { expand_tasks_per_node(bad, "SLURM_TASKS_PER_NODE"); }),
                         std::string("SLURM_TASKS_PER_NODE='") + bad + "'"))
        << bad;
  }
}

std::map<std::string, std::string> slurm_task() {
  return {{"SLURM_PROCID", "5"},      {"SLURM_NTASKS", "7"},        {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "2"},      {"SLURM_TASKS_PER_NODE", "2(x3),1"},
          {"SLURM_JOB_NODELIST", "gpu[003-006]"}, {"SLURM_JOB_ID", "123456"}};
}

TEST(LaunchSlurm, TheContractFromATasksVariables) {
  Contract c = slurm_contract(slurm_task(), std::nullopt, std::nullopt);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.world_size, 7);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.master_addr, "gpu003");
  EXPECT_EQ(c.master_port, 15000 + 123456 % 20000);
  EXPECT_EQ(slurm_port(123456), 18456);

  auto env = slurm_task();
  env["SLURM_NODEID"] = "3";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(slurm_contract(env, std::nullopt, std::nullopt).local_world_size, 1);  // the "1" after 2(x3)
  env["SLURM_NTASKS_PER_NODE"] = "4";
  EXPECT_EQ(slurm_contract(env, std::nullopt, std::nullopt).local_world_size, 4);
  env["SLURM_STEP_TASKS_PER_NODE"] = "3,2";
  env["SLURM_NODEID"] = "1";
  EXPECT_EQ(slurm_contract(env, std::nullopt, std::nullopt).local_world_size, 2);  // the step's own list first
  env["MASTER_PORT"] = "29501";
  env["SLURM_STEP_NODELIST"] = "n[7-8]";
  c = slurm_contract(env, std::nullopt, std::nullopt);
  EXPECT_EQ(c.master_port, 29501);
  EXPECT_EQ(c.master_addr, "n7");
  c = slurm_contract(env, std::string("head"), 4000);  // --master-addr / --master-port win
  EXPECT_EQ(c.master_addr, "head");
  EXPECT_EQ(c.master_port, 4000);
}

TEST(LaunchSlurm, MissingOrGarbledVariablesAreNamed) {
  auto error = [](const std::string& name, const char* value) {
    auto env = slurm_task();
    if (value) {
      env[name] = value;
    } else {
      env.erase(name);
    }
    return error_of([&] { slurm_contract(env, std::nullopt, std::nullopt); });
  };
  EXPECT_TRUE(contains(error("SLURM_PROCID", nullptr), "SLURM_PROCID is not set; run dew launch --slurm as a task of srun"));
  EXPECT_TRUE(contains(error("SLURM_NTASKS", "four"), "SLURM_NTASKS='four': 'four' is not a whole number"));
  EXPECT_TRUE(contains(error("SLURM_PROCID", "9"), "SLURM_PROCID=9 is not a rank of SLURM_NTASKS=7"));
  EXPECT_TRUE(contains(error("SLURM_LOCALID", "2"), "SLURM_LOCALID=2 is not below this node's 2 tasks"));
  EXPECT_TRUE(contains(error("SLURM_NODEID", "9"), "SLURM_NODEID=9 is past the 4 nodes of SLURM_TASKS_PER_NODE='2(x3),1'"));
  EXPECT_TRUE(contains(error("SLURM_TASKS_PER_NODE", nullptr), "SLURM_TASKS_PER_NODE is not set"));
  EXPECT_TRUE(contains(error("SLURM_JOB_NODELIST", nullptr), "SLURM_STEP_NODELIST or SLURM_JOB_NODELIST or SLURM_NODELIST is not set"));
  EXPECT_TRUE(contains(error("SLURM_JOB_NODELIST", "gpu[1-"), "SLURM_JOB_NODELIST='gpu[1-'"));
  EXPECT_TRUE(contains(error("MASTER_PORT", "http"), "MASTER_PORT='http': 'http' is not a whole number; set it to a TCP port"));
  EXPECT_TRUE(contains(error("MASTER_PORT", "99999"), "MASTER_PORT='99999' is not a TCP port"));
  EXPECT_TRUE(contains(error("SLURM_JOB_ID", nullptr), "SLURM_JOB_ID or SLURM_JOBID is not set"));
}

}  // namespace
