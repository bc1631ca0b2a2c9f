#pragma once
// One HTTP request on its way through the server: the engine requests it became (one per choice: n per
// prompt), the decoders that turn their tokens into text, and the channel between the serving loop's
// thread (which pushes updates from inside the engine's callbacks) and the HTTP handler's thread (which
// waits for them and writes the response).
//
// Ownership: the handler and the engine's callbacks hold it by shared_ptr, so it outlives whichever side
// finishes last (a client gone mid-stream, a shutdown cancelling everything).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dew/inference/engine.h"
#include "dew/serve/api_error.h"
#include "dew/serve/choice_decoder.h"

namespace dew::serve {

// What the loop tells the handler about one choice.
struct ChoiceUpdate {
  std::size_t choice = 0;
  ChoiceDelta delta;
  bool final = false;                      // the choice ended (delta.finish_reason says why)
  std::int64_t completion_tokens = 0;      // on the final update
  std::int64_t cached_prompt_tokens = 0;   // on the final update: prompt tokens the prefix cache supplied
  std::string error;                       // final: the engine's reason when it failed the choice
};

class ServeJob {
 public:
  using Clock = std::chrono::steady_clock;

  // Filled by the handler before submission; the loop's thread owns `decoders` afterwards.
  std::vector<inference::EngineRequest> requests;
  std::vector<ChoiceDecoder> decoders;
  Clock::time_point arrived = Clock::now();

  std::size_t choices() const { return requests.size(); }

  // Handler side. Waits for the loop to submit the job: nullopt when accepted, else the error (a
  // dew::Error from Engine::submit as a 400).
  std::optional<ApiError> wait_accepted();
  // Waits up to `timeout` for updates and moves them into `out`; false when none came.
  bool wait_updates(std::vector<ChoiceUpdate>& out, std::chrono::milliseconds timeout);
  // Asks the loop to end every choice now (client gone, shutdown); idempotent.
  bool cancel_requested() const { return cancel_requested_.load(); }

  // Loop side.
  void accepted(std::optional<ApiError> error);
  void push(ChoiceUpdate update);
  void request_cancel() { cancel_requested_.store(true); }

  // Loop thread only: the engine ids of the choices, and bookkeeping.
  std::vector<std::int64_t> engine_ids;
  std::size_t finished_choices = 0;
  bool first_token_seen = false;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool accepted_ = false;
  std::optional<ApiError> submit_error_;
  std::deque<ChoiceUpdate> updates_;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace dew::serve
