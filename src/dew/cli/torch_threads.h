#pragma once
// LibTorch's intra-op pool defaults to every core of the machine; dew's commands use the cores this
// process may run on (its affinity mask), or DEW_THREADS when set, like the tokenizer does.
namespace dew::cli {

void use_available_threads();

}  // namespace dew::cli
