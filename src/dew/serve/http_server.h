#pragma once
// dew serve's HTTP side, on cpp-httplib: the OpenAI routes, the API key check, request limits (body size,
// read timeout against clients that send half a request and stall), OpenAI-shaped errors for everything
// httplib answers by itself (unknown paths, bodies too large), and a thread pool big enough for every
// stream the serving loop can accept. httplib's header is kept out of this one.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dew/serve/job_builder.h"
#include "dew/serve/openai_request.h"
#include "dew/serve/server_metrics.h"
#include "dew/serve/serving_loop.h"

namespace dew::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (bind() says which)
  std::string api_key;                   // "": no authentication
  std::size_t max_body_bytes = 8u << 20;
  int read_timeout_seconds = 10;         // a request that stalls this long mid-way is dropped
  int write_timeout_seconds = 10;
  std::size_t threads = 32;              // connections served at once
};

class HttpServer {
 public:
  HttpServer(const ServedModel& model, ServingLoop& loop, ServerMetrics& metrics, HttpOptions options,
             RequestLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0). A dew::Error naming the
  // address when it cannot.
  int bind();
  // Serves until stop(); returns after every connection's handler has returned.
  void run();
  // New completion requests get 503 from now on; the others are still answered.
  void drain();
  // Waits until every completion request has been answered in full (streams to their last event).
  bool wait_answered(std::chrono::milliseconds timeout);
  void stop();

 private:
  struct Impl;
  static void install_gate(Impl* impl);
  static void install_routes(Impl* impl);
  static void install_error_shapes(Impl* impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dew::serve
