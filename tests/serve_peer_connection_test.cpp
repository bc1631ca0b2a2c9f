// serve/peer_connection: a connection's state read from a /proc/net/tcp-format table. The format: addresses
// as the host-order words of the network-order bytes, ports in hex, the state in hex (01 ESTABLISHED,
// 07 CLOSE, 08 CLOSE_WAIT, 0A LISTEN); 127.0.0.1:8000 <- 127.0.0.1:54321 is 0100007F:1F40 0100007F:D431.
#include <gtest/gtest.h>

#include <string>

#include "dew/serve/peer_connection.h"

namespace {

using dew::serve::ConnectionAddress;
using dew::serve::PeerState;
using dew::serve::peer_state_in_table;

const std::string kHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

std::string ipv4_table(const std::string& state) {
  return kHeader + "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n" +
         "   1: 0100007F:1F40 0100007F:D431 " + state + " 00000000:00000000 00:00000000 00000000     0        0 2\n";
}

TEST(ServePeerConnection, ReadsTheConnectionsStateFromTheKernelsTable) {
  const ConnectionAddress connection{"127.0.0.1", 8000, "127.0.0.1", 54321};
  EXPECT_EQ(peer_state_in_table(ipv4_table("01"), connection), PeerState::open);
  EXPECT_EQ(peer_state_in_table(ipv4_table("08"), connection), PeerState::closed);  // CLOSE_WAIT: the client sent FIN
  EXPECT_EQ(peer_state_in_table(ipv4_table("07"), connection), PeerState::closed);  // CLOSE: it reset the connection
  // Another client port, or an address that does not parse: not this connection.
  EXPECT_EQ(peer_state_in_table(ipv4_table("08"), ConnectionAddress{"127.0.0.1", 8000, "127.0.0.1", 54322}), PeerState::unknown);
  EXPECT_EQ(peer_state_in_table(ipv4_table("08"), ConnectionAddress{"not an address", 8000, "127.0.0.1", 54321}), PeerState::unknown);
}

TEST(ServePeerConnection, FindsIpv4PeersOfDualStackSocketsAndIpv6Ones) {
  // A dual-stack socket lists an IPv4 peer as ::ffff:a.b.c.d in tcp6, four words each.
  const std::string mapped = kHeader + "   0: 0000000000000000FFFF00000100007F:1F40 0000000000000000FFFF00000100007F:D431 08 0 0 0 0 0 0\n";
  EXPECT_EQ(peer_state_in_table(mapped, ConnectionAddress{"127.0.0.1", 8000, "127.0.0.1", 54321}), PeerState::closed);
  const std::string loopback6 = kHeader + "   0: 00000000000000000000000001000000:1F40 00000000000000000000000001000000:D431 01 0 0 0 0 0 0\n";
  EXPECT_EQ(peer_state_in_table(loopback6, ConnectionAddress{"::1", 8000, "::1", 54321}), PeerState::open);
}

// The real table: this process's own listening socket is there (open), an unused port is not.
TEST(ServePeerConnection, ReadsThisMachinesTable) {
  EXPECT_EQ(dew::serve::peer_state(ConnectionAddress{"127.0.0.1", 1, "127.0.0.1", 1}), PeerState::unknown);
}

}  // namespace
