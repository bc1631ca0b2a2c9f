#include "dew/launch/slurm_environment.h"

#include <charconv>

#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::launch {

namespace {

using Environment = std::map<std::string, std::string>;

constexpr const char* kSrunHint = "; run dew launch --slurm as a task of srun, which sets it";

// A whole number `text` found in `variable`='value'.
long long parse_count(const std::string& text, const std::string& variable, const std::string& value,
                      const char* hint = kSrunHint) {
  long long n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0) {
    fail(variable, "='", printable(value), "': '", printable(text), "' is not a whole number", hint);
  }
  return n;
}

// Splits at commas outside brackets: "a[1,2],b" -> "a[1,2]", "b".
std::vector<std::string> split_top_level(const std::string& text, const std::string& variable) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      fail(variable, "='", printable(text), "' has unbalanced or nested brackets; expected a Slurm hostlist like node[01-04,07]");
    }
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) fail(variable, "='", printable(text), "' has an unclosed '['; expected a Slurm hostlist like node[01-04,07]");
  parts.push_back(current);
  return parts;
}

// "01-04,07" -> 01 02 03 04 07; the width of a range's first number pads every number of it.
std::vector<std::string> expand_range_list(const std::string& ranges, const std::string& variable,
                                           const std::string& value) {
  std::vector<std::string> out;
  std::string::size_type start = 0;
  while (true) {
    auto comma = ranges.find(',', start);
    std::string range = ranges.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto dash = range.find('-');
    std::string first = range.substr(0, dash);
    std::string last = dash == std::string::npos ? first : range.substr(dash + 1);
    long long lo = parse_count(first, variable, value), hi = parse_count(last, variable, value);
    if (hi < lo || hi - lo > 1000000) {
      fail(variable, "='", printable(value), "': range '", printable(range), "' is empty or too long");
    }
    for (long long n = lo; n <= hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
      out.push_back(digits);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One comma-free hostlist entry, possibly with several bracket groups: "rack[1-2]-n[1-2]".
void expand_entry(const std::string& entry, const std::string& variable, const std::string& value,
                  std::vector<std::string>& out) {
  auto open = entry.find('[');
  if (open == std::string::npos) {
    out.push_back(entry);
    return;
  }
  auto close = entry.find(']', open);
  if (out.size() > 1000000) fail(variable, "='", printable(value), "' names over a million hosts");
  std::string prefix = entry.substr(0, open);
  std::string rest = entry.substr(close + 1);
  for (const auto& number : expand_range_list(entry.substr(open + 1, close - open - 1), variable, value)) {
    expand_entry(prefix + number + rest, variable, value, out);
  }
}

const std::string* find(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The first of `names` that is set, as (name, value); an error listing them all when none is.
std::pair<std::string, std::string> first_set(const Environment& env, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (const auto* value = find(env, name)) return {name, *value};
  }
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : " or ") + name;
  fail(list, " is not set", kSrunHint, " (srun dew launch --slurm -- COMMAND), or use --nproc / --hosts outside Slurm");
}

int number(const Environment& env, const std::vector<std::string>& names) {
  auto [name, value] = first_set(env, names);
  long long n = parse_count(value, name, value);
  if (n > 1000000000) fail(name, "='", printable(value), "' is too large", kSrunHint);
  return static_cast<int>(n);
}

int local_world_size(const Environment& env, int node_id) {
  if (const auto* step = find(env, "SLURM_STEP_TASKS_PER_NODE")) {
    auto counts = expand_tasks_per_node(*step, "SLURM_STEP_TASKS_PER_NODE");
    if (node_id < static_cast<int>(counts.size())) return counts[node_id];
  }
  if (find(env, "SLURM_NTASKS_PER_NODE")) return number(env, {"SLURM_NTASKS_PER_NODE"});
  auto [name, value] = first_set(env, {"SLURM_TASKS_PER_NODE"});
  auto counts = expand_tasks_per_node(value, name);
  if (node_id >= static_cast<int>(counts.size())) {
    fail("SLURM_NODEID=", node_id, " is past the ", counts.size(), " nodes of ", name, "='", printable(value),
         "'; the job's variables disagree (was the environment copied from another job?)");
  }
  return counts[node_id];
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& hostlist, const std::string& variable) {
  std::vector<std::string> hosts;
  for (const auto& entry : split_top_level(hostlist, variable)) {
    if (entry.empty()) fail(variable, "='", printable(hostlist), "' has an empty host name");
    expand_entry(entry, variable, hostlist, hosts);
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(const std::string& list, const std::string& variable) {
  std::vector<int> counts;
  std::string::size_type start = 0;
  while (true) {
    auto comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    // "2(x3)": 2 tasks on each of 3 nodes.
    long long repeat = 1;
    if (auto paren = item.find('('); paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        fail(variable, "='", printable(list), "': '", printable(item), "' is not N or N(xM)");
      }
      repeat = parse_count(item.substr(paren + 2, item.size() - paren - 3), variable, list);
      item.resize(paren);
    }
    long long tasks = parse_count(item, variable, list);
    if (tasks < 1 || repeat < 1 || repeat > 1000000 || tasks > 1000000) {
      fail(variable, "='", printable(list), "': counts must be between 1 and 1000000");
    }
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(tasks));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

int slurm_port(long long job_id) { return static_cast<int>(15000 + job_id % 20000); }

Contract slurm_contract(const Environment& env, const std::optional<std::string>& master_addr,
                        const std::optional<int>& master_port) {
  Contract c;
  c.rank = number(env, {"SLURM_PROCID"});
  c.world_size = number(env, {"SLURM_NTASKS", "SLURM_NPROCS"});
  if (c.world_size < 1 || c.rank >= c.world_size) {
    fail("SLURM_PROCID=", c.rank, " is not a rank of SLURM_NTASKS=", c.world_size,
         " tasks; the job's variables disagree (was the environment copied from another job?)");
  }
  c.local_rank = number(env, {"SLURM_LOCALID"});
  c.local_world_size = local_world_size(env, number(env, {"SLURM_NODEID"}));
  if (c.local_rank >= c.local_world_size) {
    fail("SLURM_LOCALID=", c.local_rank, " is not below this node's ", c.local_world_size,
         " tasks; the job's variables disagree (was the environment copied from another job?)");
  }
  if (master_addr) {
    c.master_addr = *master_addr;
  } else {
    auto [name, value] = first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    c.master_addr = expand_hostlist(value, name).front();
  }
  if (master_port) {
    c.master_port = *master_port;
  } else if (const auto* port = find(env, "MASTER_PORT")) {
    constexpr const char* kPortHint = "; set it to a TCP port (1..65535) or unset it";
    long long p = parse_count(*port, "MASTER_PORT", *port, kPortHint);
    if (p < 1 || p > 65535) fail("MASTER_PORT='", printable(*port), "' is not a TCP port", kPortHint);
    c.master_port = static_cast<int>(p);
  } else {
    auto [name, value] = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
    c.master_port = slurm_port(parse_count(value, name, value));
  }
  return c;
}

}  // namespace dew::launch
