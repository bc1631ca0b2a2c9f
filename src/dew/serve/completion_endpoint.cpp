#include "dew/serve/completion_endpoint.h"

#include <algorithm>
#include <cctype>

#include "dew/core/error.h"
#include "dew/serve/openai_response.h"
#include "dew/serve/peer_connection.h"
#include "dew/serve/utf8_holdback.h"

namespace dew::serve {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);  // how often a waiting stream checks its client
// How often a request waiting for a whole answer asks the kernel whether its client is still there.
constexpr auto kPeerCheck = std::chrono::milliseconds(250);
// nginx's status for a client that closed its connection before the answer: written to no one, but counted
// under it in /metrics.
constexpr int kClientClosedRequest = 499;

void check_content_type(const httplib::Request& request) {
  std::string type = request.get_header_value("Content-Type");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  // "application/json" with or without parameters (charset=utf-8).
  if (type.rfind("application/json", 0) == 0 && (type.size() == 16 || type[16] == ';' || type[16] == ' ')) return;
  throw ApiError(415,
                 str("Content-Type is '", type.empty() ? "(none)" : type,
                     "'; send the JSON body with 'Content-Type: application/json' (curl: -H 'Content-Type: application/json')"),
                 "", "unsupported_media_type");
}

void check_model(const CompletionRequest& parsed, const ServedModel& model) {
  if (parsed.model.empty() || parsed.model == model.name) return;
  throw ApiError(404, str("the model '", parsed.model, "' does not exist here; this server serves '", model.name, "'"),
                 "model", "model_not_found");
}

// Accepted by the loop, or an ApiError: 429 when full, 503 while shutting down, 400 when the engine refused.
void submit(EndpointContext& context, const BuiltJob& built) {
  switch (context.loop.submit(built.job)) {
    case ServingLoop::Admission::full:
      throw ApiError(429,
                     str("the server is full: ", context.loop.outstanding(), " requests are running or queued, at most ",
                         context.loop.capacity(), " (--max-batch + --max-queue); retry later"),
                     "", "queue_full", "rate_limit_error");
    case ServingLoop::Admission::closed:
      throw ApiError(503, "the server is shutting down and takes no new requests", "", "shutting_down", "server_error");
    case ServingLoop::Admission::accepted: break;
  }
  if (auto error = built.job->wait_accepted()) throw *error;
}

ApiError choice_failure(const std::string& error) {
  return ApiError(500, str("generation failed: ", error), "", "generation_error", "server_error");
}

ApiError shutdown_cancel() {
  return ApiError(503, "the server shut down before the request finished", "", "shutting_down", "server_error");
}

// A client that closes its connection while it waits has its job cancelled within kPeerCheck (its batch
// slots freed for the next step), rather than when its last token is generated.
void answer_whole(const CompletionRequest& parsed, const BuiltJob& built, ResponseHeader header, const httplib::Request& request,
                  httplib::Response& response, ServingLoop& loop) {
  auto& job = *built.job;
  const ConnectionAddress connection{request.local_addr, request.local_port, request.remote_addr, request.remote_port};
  auto next_check = ServeJob::Clock::now() + kPeerCheck;
  std::vector<ChoiceResult> results(job.choices());
  Usage usage{built.prompt_tokens, 0};
  std::size_t finished = 0;
  std::string failure;
  bool cancelled = false;
  std::vector<ChoiceUpdate> updates;
  while (finished < job.choices()) {
    updates.clear();
    const bool got = job.wait_updates(updates, kPoll);
    if (ServeJob::Clock::now() >= next_check) {
      next_check = ServeJob::Clock::now() + kPeerCheck;
      if (peer_state(connection) == PeerState::closed) {
        loop.cancel(built.job);
        response.status = kClientClosedRequest;
        return;
      }
    }
    if (!got) continue;
    for (auto& update : updates) {
      auto& result = results[update.choice];
      result.text += update.delta.text;
      for (auto& entry : update.delta.logprobs) result.logprobs.push_back(std::move(entry));
      if (!update.final) continue;
      ++finished;
      result.finish_reason = update.delta.finish_reason.value_or("stop");
      usage.add_choice(update.completion_tokens, update.cached_prompt_tokens);
      if (!update.error.empty() && failure.empty()) failure = update.error;
      cancelled |= result.finish_reason == "cancelled";
    }
  }
  if (!failure.empty()) throw choice_failure(failure);
  if (cancelled) throw shutdown_cancel();
  if (parsed.echo) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& prompt = built.prompt_texts[i / static_cast<std::size_t>(built.n)];
      results[i].text = valid_utf8(prompt) + results[i].text;
      results[i].text_offset = utf8_length(valid_utf8(prompt));
    }
  }
  response.status = 200;
  response.set_content(dump_json(whole_response(header, results, usage, parsed.logprobs)), "application/json");
}

// Counts a request in EndpointContext::in_flight while it lives.
class InFlight {
 public:
  explicit InFlight(std::atomic<std::int64_t>& count) : count_(count) { ++count_; }
  ~InFlight() { --count_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<std::int64_t>& count_;
};

// What a stream has sent so far; shared by httplib's content provider calls and its release callback.
struct StreamState {
  std::shared_ptr<ServeJob> job;
  ServingLoop* loop = nullptr;
  ResponseHeader header;
  bool logprobs = false, include_usage = false, echo = false;
  std::int64_t n = 1;
  std::vector<std::string> prompt_texts;
  Usage usage;
  bool started = false, complete = false;
  std::size_t finished = 0;
  std::vector<std::size_t> first_offsets;  // completions with echo: where each choice's text starts
  std::unique_ptr<InFlight> in_flight;     // released with the last reference, after the last write
};

// The events for one provider call: at the start the opening chunks, then whatever updates came.
std::string next_events(StreamState& s, std::vector<ChoiceUpdate>& updates) {
  std::string out;
  const bool chat = s.header.endpoint == Endpoint::chat_completions;
  if (!s.started) {
    s.started = true;
    s.first_offsets.assign(s.job->choices(), 0);
    for (std::size_t i = 0; i < s.job->choices(); ++i) {
      if (chat) {
        out += sse_event(delta_chunk(s.header, i, ChoiceDelta{}, /*first=*/true, false, s.include_usage));
      } else if (s.echo) {
        auto prompt = valid_utf8(s.prompt_texts[i / static_cast<std::size_t>(s.n)]);
        s.first_offsets[i] = utf8_length(prompt);
        out += sse_event(delta_chunk(s.header, i, ChoiceDelta{.text = prompt}, true, false, s.include_usage));
      }
    }
  }
  for (auto& update : updates) {
    if (update.final) {
      ++s.finished;
      s.usage.add_choice(update.completion_tokens, update.cached_prompt_tokens);
      if (!update.error.empty()) {
        out += sse_event(error_body(choice_failure(update.error)));
        continue;
      }
      if (update.delta.finish_reason == "cancelled") {
        out += sse_event(error_body(shutdown_cancel()));
        continue;
      }
    }
    out += sse_event(delta_chunk(s.header, update.choice, update.delta, false, s.logprobs, s.include_usage,
                                 s.first_offsets[update.choice]));
  }
  if (s.finished == s.job->choices()) {
    if (s.include_usage) out += sse_event(usage_chunk(s.header, s.usage));
    out += sse_done();
    s.complete = true;
  }
  return out;
}

void answer_stream(const CompletionRequest& parsed, BuiltJob built, ResponseHeader header, EndpointContext& context,
                   httplib::Response& response) {
  auto& loop = context.loop;
  auto state = std::make_shared<StreamState>();
  state->in_flight = std::make_unique<InFlight>(context.in_flight);
  state->job = built.job;
  state->loop = &loop;
  state->header = std::move(header);
  state->logprobs = parsed.logprobs;
  state->include_usage = parsed.include_usage;
  state->echo = parsed.echo;
  state->n = built.n;
  state->prompt_texts = std::move(built.prompt_texts);
  state->usage.prompt_tokens = built.prompt_tokens;
  response.status = 200;
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: pass events on at once
  response.set_chunked_content_provider(
      "text/event-stream",
      [state](std::size_t, httplib::DataSink& sink) {
        std::vector<ChoiceUpdate> updates;
        // Waits a little so httplib checks the socket between calls (a client gone is found within kPoll
        // even while the request is queued or prefilling and nothing is written).
        if (state->started) state->job->wait_updates(updates, kPoll);
        std::string events = next_events(*state, updates);
        if (!events.empty() && !sink.write(events.data(), events.size())) {
          state->loop->cancel(state->job);
          return false;
        }
        if (state->complete) sink.done();
        return true;
      },
      [state](bool) {
        // However the stream ended (done, client gone, server stopping), a job still running is cancelled.
        if (!state->complete) state->loop->cancel(state->job);
      });
}

}  // namespace

void send_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status();
  response.set_content(error_text(error), "application/json");
}

void answer_completion(Endpoint endpoint, const httplib::Request& request, httplib::Response& response,
                       EndpointContext& context) {
  InFlight counted(context.in_flight);
  try {
    check_content_type(request);
    auto body = parse_json_body(request.body);
    auto parsed = endpoint == Endpoint::chat_completions
                      ? parse_chat_request(body, context.limits, context.model.defaults)
                      : parse_completion_request(body, context.limits, context.model.defaults);
    check_model(parsed, context.model);
    auto built = build_job(parsed, context.model);
    built.job->arrived = ServeJob::Clock::now();
    submit(context, built);
    ResponseHeader header{endpoint, new_response_id(endpoint), unix_time(), context.model.name};
    if (parsed.stream) {
      answer_stream(parsed, std::move(built), std::move(header), context, response);
    } else {
      answer_whole(parsed, built, std::move(header), request, response, context.loop);
    }
  } catch (const ApiError& e) {
    send_error(response, e);
  } catch (const dew::Error& e) {
    // A tokenizer or template error on the client's text: still the client's request.
    send_error(response, ApiError(400, e.what()));
  }
}

}  // namespace dew::serve
