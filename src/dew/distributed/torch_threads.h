#pragma once
// LibTorch's intra-op pool defaults to every core of the machine; dew's commands use the cores this
// process may run on (its affinity mask), shared with the other processes of a job on this host, or
// DEW_THREADS when set, like the tokenizer does.
namespace dew::distributed {

void use_available_threads();

}  // namespace dew::distributed
