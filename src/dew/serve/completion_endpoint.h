#pragma once
// POST /v1/chat/completions and POST /v1/completions: body -> CompletionRequest -> ServeJob -> the serving
// loop, then either one JSON answer or a stream of server-sent events. A streaming client that goes away
// (a write fails, or httplib finds the socket closed between events) cancels its job at once, which frees
// its batch slots before the engine's next step; a client waiting for a whole answer that closes its
// connection cancels its job within a quarter of a second (peer_connection.h: the kernel's TCP table).
#include <httplib.h>

#include <atomic>

#include "dew/serve/job_builder.h"
#include "dew/serve/openai_request.h"
#include "dew/serve/server_metrics.h"
#include "dew/serve/serving_loop.h"

namespace dew::serve {

struct EndpointContext {
  const ServedModel& model;
  ServingLoop& loop;
  RequestLimits limits;
  // Completion requests whose answer is not yet all written (a stream counts until its last event): a
  // shutdown waits for them before stopping the server, which would cut streams short.
  std::atomic<std::int64_t> in_flight{0};
};

// Writes an ApiError as the response (status and OpenAI error JSON).
void send_error(httplib::Response& response, const ApiError& error);

void answer_completion(Endpoint endpoint, const httplib::Request& request, httplib::Response& response,
                       EndpointContext& context);

}  // namespace dew::serve
