#include "dew/distributed/process_group.h"

// c10d's Gloo declarations sit behind these switches, which the wheel's own build defines; its headers include
// gloo's, which the wheel does not ship (Debian's libgloo-dev provides them: only declarations are used, the
// code is the copy inside libtorch_cpu).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// NCCL for CUDA tensors, in the CUDA build: cmake/DewTorchCuda.cmake defines USE_C10D_NCCL (libtorch_cuda
// is built with NCCL; the macro opens the header) and finds nccl.h (the toolkit's or the NCCL wheel's).
// Not compiled in the CPU build.
#if defined(DEW_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define DEW_WITH_NCCL 1
#endif

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dew/core/error.h"

namespace dew::distributed {
namespace {

using namespace std::chrono_literals;

constexpr auto kHeartbeatPeriod = 1s;
// How long a silent heartbeat takes to mean "stopped": a few periods, so a busy but live peer is not named.
constexpr auto kSilenceToBlame = 3500ms;

std::string heartbeat_key(std::int64_t rank) { return str("dew/heartbeat/", rank); }
std::string failure_key(std::int64_t rank) { return str("dew/failed/", rank); }

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// Flattens same-dtype tensors into one buffer per dtype, so one collective moves them all.
struct Flattened {
  std::vector<std::vector<std::size_t>> members;  // per buffer, indices into the caller's vector
  std::vector<at::Tensor> buffers;
};

Flattened flatten(const std::vector<at::Tensor>& tensors) {
  Flattened out;
  std::vector<at::ScalarType> types;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto type = tensors[i].scalar_type();
    auto it = std::find(types.begin(), types.end(), type);
    if (it == types.end()) {
      types.push_back(type);
      out.members.emplace_back();
      it = types.end() - 1;
    }
    out.members[static_cast<std::size_t>(it - types.begin())].push_back(i);
  }
  for (const auto& members : out.members) {
    std::vector<at::Tensor> flat;
    for (auto i : members) flat.push_back(tensors[i].reshape({-1}));
    out.buffers.push_back(at::cat(flat));
  }
  return out;
}

void unflatten(const Flattened& flat, std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  for (std::size_t b = 0; b < flat.buffers.size(); ++b) {
    std::int64_t offset = 0;
    for (auto i : flat.members[b]) {
      auto& t = tensors[i];
      t.copy_(flat.buffers[b].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

struct WorkHolder {
  c10::intrusive_ptr<c10d::Work> work;
};

ProcessGroup* g_group = nullptr;
std::unique_ptr<ProcessGroup> g_owner;

}  // namespace

struct ProcessGroup::State {
  ProcessPlace place;
  std::chrono::milliseconds timeout{0};
  c10::Device device{c10::kCPU};  // where host values travel through the backend (NCCL reduces CUDA tensors only)
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::thread heartbeat;
  std::mutex mutex;
  std::condition_variable stop_signal;
  bool stopping = false;
};

ProcessGroup::ProcessGroup(std::unique_ptr<State> state) : state_(std::move(state)) {
  // The heartbeat: a counter in the store that moves every period while this process runs, on its own
  // connection so a collective in progress does not hold it up.
  auto store = state_->store->clone();
  state_->heartbeat = std::thread([this, store] {
    const std::string key = heartbeat_key(state_->place.rank);
    std::unique_lock lock(state_->mutex);
    while (!state_->stopping) {
      try {
        store->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone (rank 0 exited): nothing left to tell
      }
      state_->stop_signal.wait_for(lock, kHeartbeatPeriod, [this] { return state_->stopping; });
    }
  });
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->stop_signal.notify_all();
  if (state_->heartbeat.joinable()) state_->heartbeat.join();
  // The backend's normal end, as destroy_process_group does it ("Destroy (shutdown) this backend -- normal
  // exit", ProcessGroupNCCL.hpp): NCCL's communicators end here rather than in a destructor at some later
  // point. Gloo's shutdown does nothing.
  if (state_->backend) {
    try {
      state_->backend->shutdown();
    } catch (const std::exception&) {
    }
  }
}

std::unique_ptr<ProcessGroup> ProcessGroup::join(const ProcessPlace& place, c10::Device device, std::chrono::milliseconds timeout) {
  auto state = std::make_unique<State>();
  state->place = place;
  state->timeout = timeout;
  state->device = device;
  const std::string where = str(place.master_addr, ":", place.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(place.master_port);
    options.isServer = place.rank == 0;
    options.numWorkers = static_cast<std::size_t>(place.world);
    options.waitWorkers = true;
    options.timeout = timeout;
    state->store = c10::make_intrusive<c10d::TCPStore>(place.master_addr, options);
  } catch (const std::exception& e) {
    fail(place.describe(), ": could not ", place.rank == 0 ? "serve" : "reach", " the rendezvous store at ", where,
         " within ", timeout.count() / 1000.0, " s (", first_line(e.what()), "); ",
         place.rank == 0 ? "is the port taken? pick another with `dew launch --master-port`"
                         : "did rank 0 start, and are MASTER_ADDR and MASTER_PORT its host and port?");
  }
  if (device.is_cuda()) {
#ifdef DEW_WITH_NCCL
    try {
      const c10::Device gpu(c10::kCUDA, device.has_index() ? device.index() : c10::cuda::current_device());
      state->device = gpu;
      // This process's GPU becomes the current one (torch.cuda.set_device(local_rank) in a PyTorch job), so
      // CUDA calls that name no device (NCCL's set-up, LibTorch's current stream) open no context on GPU 0.
      c10::cuda::set_device(gpu.index());
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;  // the watchdog's limit for each collective
      auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(state->store, static_cast<int>(place.rank),
                                                              static_cast<int>(place.world), options);
      // As init_process_group(device_id=...): a barrier, the only collective without a tensor to say where
      // it runs, uses this GPU instead of guessing one from the rank.
      nccl->setBoundDeviceId(gpu);
      state->backend = nccl;
    } catch (const std::exception& e) {
      fail(place.describe(), ": the NCCL backend could not connect the ", place.world, " processes through the store at ",
           where, " (", first_line(e.what()), ")");
    }
    return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(state)));
#else
    fail(place.describe(), ": multi-process training on CUDA needs the NCCL backend, which this dew was built without; "
         "train on the CPU (trainer.device=cpu) or use a CUDA build");
#endif
  }
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    if (is_loopback(place.master_addr)) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    state->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(state->store, static_cast<int>(place.rank),
                                                                 static_cast<int>(place.world), options);
  } catch (const std::exception& e) {
    fail(place.describe(), ": the Gloo backend could not connect the ", place.world, " processes through the store at ",
         where, " (", first_line(e.what()), "); on several hosts set GLOO_SOCKET_IFNAME to the network interface they share");
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(state)));
}

std::int64_t ProcessGroup::rank() const { return state_->place.rank; }
std::int64_t ProcessGroup::world() const { return state_->place.world; }
const ProcessPlace& ProcessGroup::place() const { return state_->place; }

void ProcessGroup::fail_collective(const std::string& what, const std::exception& error) {
  const auto& place = state_->place;
  std::string diagnosis;
  try {
    // A fresh connection with a short timeout: the diagnosis must not hang where the collective did.
    auto store = state_->store->clone();
    store->setTimeout(5s);
    std::vector<std::string> failed;
    for (std::int64_t r = 0; r < place.world; ++r) {
      if (r != place.rank && store->check({failure_key(r)})) {
        auto message = store->get(failure_key(r));
        failed.push_back(str("rank ", r, " failed: ", std::string(message.begin(), message.end())));
      }
    }
    if (!failed.empty()) store->add("dew/failure_seen", 1);
    if (!failed.empty()) {
      for (const auto& f : failed) diagnosis += (diagnosis.empty() ? "" : "; ") + f;
    } else {
      auto beats = [&] {
        std::vector<std::int64_t> out;
        for (std::int64_t r = 0; r < place.world; ++r) out.push_back(store->add(heartbeat_key(r), 0));
        return out;
      };
      const auto before = beats();
      std::this_thread::sleep_for(kSilenceToBlame);
      const auto after = beats();
      for (std::int64_t r = 0; r < place.world; ++r) {
        if (r != place.rank && after[static_cast<std::size_t>(r)] == before[static_cast<std::size_t>(r)]) {
          diagnosis += str(diagnosis.empty() ? "" : ", ", "rank ", r);
        }
      }
      diagnosis = diagnosis.empty() ? std::string("every other rank is still alive: one of them is stuck or slower than the timeout")
                                    : diagnosis + " stopped answering (no heartbeat for 3.5 s): it exited or hung; its own output says why";
    }
  } catch (const std::exception&) {
    diagnosis = place.rank == 0 ? std::string("the rendezvous store is unreachable")
                                : std::string("the rendezvous store on rank 0 is unreachable: rank 0 has exited; its output says why");
  }
  fail(place.describe(), ": ", what, " failed (", first_line(error.what()), "); ", diagnosis);
}

void ProcessGroup::report_failure(const std::string& message) noexcept {
  try {
    auto store = state_->store->clone();
    store->setTimeout(2s);
    store->set(failure_key(state_->place.rank), bytes_of(message));
    // Closing this rank's connections ends the others' waits at once (rather than at the timeout); they
    // then read the message from the store. Rank 0 serves the store, so it stays a moment for them to read.
    // abort() first ("similar to ncclCommAbort"): NCCL's communicators end without waiting for the peers;
    // Gloo's abort does nothing.
    if (state_->backend) state_->backend->abort();
    state_->backend.reset();
    if (state_->place.rank == 0) {
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while (store->add("dew/failure_seen", 0) < state_->place.world - 1 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
      }
    }
  } catch (...) {
  }
}

void ProcessGroup::run(const std::string& what, const std::function<void()>& collective) {
  try {
    collective();
  } catch (const std::exception& e) {
    fail_collective(what, e);
  }
}

void ProcessGroup::Pending::wait() {
  auto* holder = static_cast<WorkHolder*>(work_.get());
  group_->run(what_, [&] { holder->work->wait(); });
}

ProcessGroup::Pending ProcessGroup::all_reduce_sum_async(at::Tensor tensor, std::string what) {
  std::vector<at::Tensor> tensors{std::move(tensor)};
  auto holder = std::make_shared<WorkHolder>();
  run(what, [&] { holder->work = state_->backend->allreduce(tensors); });
  return Pending(this, std::move(holder), std::move(what));
}

void ProcessGroup::all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.empty()) return;
  Flattened flat = flatten(tensors);
  for (auto& buffer : flat.buffers) all_reduce_sum_async(buffer, what).wait();
  unflatten(flat, tensors);
}

std::vector<double> ProcessGroup::all_reduce_sum(const std::vector<double>& values, const std::string& what) {
  if (values.empty()) return values;
  auto t = at::tensor(at::ArrayRef<double>(values), at::kDouble).to(state_->device);
  all_reduce_sum_async(t, what).wait();
  t = t.to(at::kCPU).contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, std::int64_t root, const std::string& what) {
  if (tensors.empty()) return;
  Flattened flat = flatten(tensors);
  for (auto& buffer : flat.buffers) {
    std::vector<at::Tensor> one{buffer};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    run(what, [&] { state_->backend->broadcast(one, options)->wait(); });
  }
  unflatten(flat, tensors);
}

void ProcessGroup::all_gather(at::Tensor& full, const at::Tensor& mine, const std::string& what) {
  at::Tensor input = mine.contiguous();
  run(what, [&] { state_->backend->_allgather_base(full, input)->wait(); });
}

void ProcessGroup::reduce_scatter_sum(at::Tensor& mine, const at::Tensor& full, const std::string& what) {
  at::Tensor input = full.contiguous();
  run(what, [&] { state_->backend->_reduce_scatter_base(mine, input)->wait(); });
}

void ProcessGroup::barrier(const std::string& what) {
  run(what, [&] { state_->backend->barrier()->wait(); });
}

ProcessGroup& join_process_group(c10::Device device, std::chrono::milliseconds timeout) {
  if (!g_group) {
    const auto& place = process_place();
    if (!place.multi_process()) fail("internal: join_process_group called in a job of one process");
    g_owner = ProcessGroup::join(place, device, timeout);
    g_group = g_owner.get();
  }
  return *g_group;
}

ProcessGroup* process_group() { return g_group; }

void leave_process_group() {
  g_group = nullptr;
  g_owner.reset();
}

}  // namespace dew::distributed
