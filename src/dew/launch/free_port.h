#pragma once
// A TCP port on 127.0.0.1 that nothing listens on right now, for a local launch without --master-port.

namespace dew::launch {

// Binds port 0 (the kernel picks an unused one), reads which it got and closes the socket. Another
// program could take it before rank 0 binds it; the window is short, as with torchrun's same trick.
int free_port();

}  // namespace dew::launch
