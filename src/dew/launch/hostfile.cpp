#include "dew/launch/hostfile.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/core/text_lines.h"

namespace dew::launch {

namespace {

// `where` says where the name came from ("--hosts 'a,,b'", "hostfile 'f' line 3") for the messages.
void check_host_name(const std::string& name, const std::string& where) {
  // ssh reads a host starting with '-' as an option (-oProxyCommand=... runs a command), so such a
  // name is refused rather than passed on.
  if (!name.empty() && name.front() == '-') {
    fail(where, ": host '", printable(name), "' starts with '-'; give a host name or address");
  }
}

void check_unique(const std::vector<Host>& hosts, const Host& host, const std::string& where) {
  for (const auto& seen : hosts) {
    if (seen.name == host.name) {
      // Two entries for one machine would give both the same LOCAL_RANKs (and GPUs).
      fail(where, ": host '", printable(host.name), "' is listed twice; list it once (with slots=K for K processes)");
    }
  }
}

int parse_slots(const std::string& value, const std::string& where) {
  int slots = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), slots);
  if (ec != std::errc() || end != value.data() + value.size() || slots < 1) {
    fail(where, ": slots='", printable(value), "' is not a positive whole number; write e.g. 'slots=4'");
  }
  return slots;
}

}  // namespace

std::vector<Host> parse_host_list(const std::string& list) {
  std::vector<Host> hosts;
  const std::string where = "--hosts '" + printable(list) + "'";
  std::string::size_type start = 0;
  while (true) {
    auto comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty() || name.find_first_of(" \t\r\n") != std::string::npos) {
      fail(where, " has an empty or blank-containing host name; separate hosts with commas only, e.g. 'node01,node02'");
    }
    check_host_name(name, where);
    Host host{name, 0};
    check_unique(hosts, host, where);
    hosts.push_back(host);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

std::vector<Host> parse_hostfile(const std::string& text, const std::string& file) {
  std::vector<Host> hosts;
  auto lines = text_lines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) continue;  // blank or comment only
    const std::string where = "hostfile '" + printable(file) + "' line " + std::to_string(i + 1);
    check_host_name(name, where);
    Host host{name, 0};
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) == 0) {
        host.slots = parse_slots(word.substr(6), where);
      } else if (word.rfind("max_slots=", 0) == 0 || word.rfind("max-slots=", 0) == 0) {
        // Open MPI's oversubscription cap: dew launch never starts more than slots, so it says nothing.
      } else {
        fail(where, ": '", printable(word), "' is not understood; a line is 'HOST' or 'HOST slots=K'");
      }
    }
    check_unique(hosts, host, where);
    hosts.push_back(host);
  }
  if (hosts.empty()) {
    fail("hostfile '", printable(file), "' names no host (only blank lines and comments); write one host per line, e.g. 'node01 slots=4'");
  }
  return hosts;
}

std::vector<Host> read_hostfile(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    fail("--hostfile '", printable(file.string()), "' is a directory; give a file with one host per line");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    fail("cannot read --hostfile '", printable(file.string()), "': ", std::strerror(errno),
         "; give a readable file with one host per line");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), file.string());
}

}  // namespace dew::launch
