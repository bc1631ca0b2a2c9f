#pragma once
// Whether an HTTP client has closed its end of the connection while its request waits for a whole
// (non-streaming) answer. Debian's cpp-httplib (0.11) gives a handler no socket, and such a handler writes
// nothing until the answer is ready, so a client that gave up would otherwise keep its batch slots until its
// tokens were all generated. The kernel knows: the server's side of a TCP connection whose peer closed
// (sent FIN, or reset it) is in CLOSE_WAIT (or gone). Linux's /proc/net/tcp and tcp6 list every
// connection with its addresses, ports and state; httplib's Request carries the four addresses and ports.
//
// A client that half-closes (shuts down its sending side and still waits for the answer) looks the same;
// HTTP clients do not do that in practice (curl, Python's, browsers), and a stream's client is never asked.
#include <string>
#include <string_view>

namespace dew::serve {

enum class PeerState { open, closed, unknown };

struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

// The state of `connection` in the text of one /proc/net/tcp-format table (tcp for IPv4 addresses, tcp6 for
// IPv6 ones, IPv4-mapped included): closed for CLOSE_WAIT, LAST_ACK, CLOSING and CLOSE, open for any other
// state, unknown when the table has no such connection or an address does not parse.
PeerState peer_state_in_table(std::string_view table, const ConnectionAddress& connection);

// The same from this process's network namespace (/proc/net/tcp, then tcp6); unknown where neither can be
// read (not Linux, no /proc).
PeerState peer_state(const ConnectionAddress& connection);

}  // namespace dew::serve
