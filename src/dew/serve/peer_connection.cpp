#include "dew/serve/peer_connection.h"

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew::serve {

namespace {

// An address as /proc/net/tcp prints it: each 32-bit word of the network-order bytes read in host order
// (little-endian on x86-64), as 8 hex digits; 1 word for IPv4, 4 for IPv6.
std::string kernel_hex(const std::string& address, bool& ipv6) {
  std::array<unsigned char, 16> bytes{};
  std::size_t length = 0;
  if (inet_pton(AF_INET, address.c_str(), bytes.data()) == 1) {
    length = 4;
    ipv6 = false;
  } else if (inet_pton(AF_INET6, address.c_str(), bytes.data()) == 1) {
    length = 16;
    ipv6 = true;
  } else {
    return {};
  }
  std::string out;
  for (std::size_t w = 0; w < length; w += 4) {
    std::uint32_t word = 0;
    for (int b = 3; b >= 0; --b) word = (word << 8) | bytes[w + static_cast<std::size_t>(b)];  // little-endian read
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08X", word);
    out += hex;
  }
  return out;
}

std::string endpoint_hex(const std::string& address, int port, bool& ipv6) {
  auto hex = kernel_hex(address, ipv6);
  if (hex.empty() || port < 0 || port > 65535) return {};
  char p[6];
  std::snprintf(p, sizeof p, "%04X", port);
  return hex + ":" + p;
}

// Both forms of an IPv4 endpoint as a tcp6 table shows a dual-stack socket's connection (::ffff:a.b.c.d).
std::string mapped_hex(const std::string& address, int port) {
  bool ipv6 = false;
  if (kernel_hex(address, ipv6).empty() || ipv6) return {};
  return endpoint_hex("::ffff:" + address, port, ipv6);
}

bool same_hex(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto up = [](char c) { return c >= 'a' && c <= 'f' ? static_cast<char>(c - 'a' + 'A') : c; };
    if (up(a[i]) != up(b[i])) return false;
  }
  return true;
}

}  // namespace

PeerState peer_state_in_table(std::string_view table, const ConnectionAddress& c) {
  bool local_v6 = false, remote_v6 = false;
  auto local = endpoint_hex(c.local_addr, c.local_port, local_v6);
  auto remote = endpoint_hex(c.remote_addr, c.remote_port, remote_v6);
  if (local.empty() || remote.empty()) return PeerState::unknown;
  auto local_mapped = mapped_hex(c.local_addr, c.local_port), remote_mapped = mapped_hex(c.remote_addr, c.remote_port);
  std::size_t start = 0;
  while (start < table.size()) {
    auto end = table.find('\n', start);
    if (end == std::string_view::npos) end = table.size();
    std::istringstream line{std::string(table.substr(start, end - start))};
    start = end + 1;
    std::string slot, l, r, state;
    if (!(line >> slot >> l >> r >> state) || slot.empty() || slot.back() != ':') continue;  // the header
    const bool match = (same_hex(l, local) && same_hex(r, remote)) ||
                       (!local_mapped.empty() && same_hex(l, local_mapped) && same_hex(r, remote_mapped));
    if (!match) continue;
    // TCP states (include/net/tcp_states.h): 07 CLOSE, 08 CLOSE_WAIT, 09 LAST_ACK, 0B CLOSING.
    if (same_hex(state, "07") || same_hex(state, "08") || same_hex(state, "09") || same_hex(state, "0B")) return PeerState::closed;
    return PeerState::open;
  }
  return PeerState::unknown;
}

PeerState peer_state(const ConnectionAddress& connection) {
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::string table;
    try {
      table = read_file(path);
    } catch (const Error&) {
      continue;  // no such table here (no IPv6, not Linux)
    }
    auto state = peer_state_in_table(table, connection);
    if (state != PeerState::unknown) return state;
  }
  return PeerState::unknown;
}

}  // namespace dew::serve
