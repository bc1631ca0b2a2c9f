#include "dew/serve/http_server.h"

#include <httplib.h>

#include <atomic>
#include <thread>

#include "dew/core/error.h"
#include "dew/serve/completion_endpoint.h"
#include "dew/serve/openai_response.h"

namespace dew::serve {

struct HttpServer::Impl {
  const ServedModel& model;
  ServingLoop& loop;
  ServerMetrics& metrics;
  HttpOptions options;
  EndpointContext context;
  httplib::Server server;
  std::atomic<bool> draining{false};
  std::atomic<bool> run_returned{false};
  std::int64_t created = unix_time();

  Impl(const ServedModel& m, ServingLoop& l, ServerMetrics& s, HttpOptions o, RequestLimits limits)
      : model(m), loop(l), metrics(s), options(std::move(o)), context{m, l, limits} {}
};

namespace {

// The metrics label for a path: the routes by name, anything else as "other" (a scanner trying a
// thousand paths must not make a thousand series).
std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == known) return known;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  return "other";
}

bool authorized(const httplib::Request& request, const std::string& key) {
  const std::string header = request.get_header_value("Authorization");
  const std::string expected = "Bearer " + key;
  // Compared in full whatever the first difference, so timing does not reveal the key's prefix.
  if (header.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < header.size(); ++i) diff |= static_cast<unsigned char>(header[i] ^ expected[i]);
  return diff == 0;
}

}  // namespace

HttpServer::HttpServer(const ServedModel& model, ServingLoop& loop, ServerMetrics& metrics, HttpOptions options,
                       RequestLimits limits)
    : impl_(std::make_unique<Impl>(model, loop, metrics, std::move(options), limits)) {
  auto& s = *impl_;
  auto& server = s.server;
  Impl* impl = impl_.get();
  const std::size_t threads = s.options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(s.options.max_body_bytes);
  server.set_read_timeout(s.options.read_timeout_seconds, 0);
  server.set_write_timeout(s.options.write_timeout_seconds, 0);
  server.set_keep_alive_timeout(5);
  server.set_tcp_nodelay(true);  // small SSE events go out at once

  install_gate(impl);
  install_routes(impl);
  install_error_shapes(impl);
}

// Before any route: the API key (all but /health) and, while draining, 503 for new completions.
void HttpServer::install_gate(Impl* impl) {
  auto& server = impl->server;
  server.set_pre_routing_handler([impl](const httplib::Request& request, httplib::Response& response) {
    // /health answers without a key, so load balancers and readiness probes need no secret.
    if (!impl->options.api_key.empty() && request.path != "/health" && !authorized(request, impl->options.api_key)) {
      send_error(response, ApiError(401,
                                    request.has_header("Authorization")
                                        ? "the API key is wrong; send 'Authorization: Bearer KEY' with the key dew serve was started with"
                                        : "no API key; send 'Authorization: Bearer KEY' (the key given to dew serve by --api-key or DEW_API_KEY)",
                                    "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (impl->draining.load() && request.method == "POST") {
      send_error(response, ApiError(503, "the server is shutting down and takes no new requests", "", "shutting_down", "server_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// The OpenAI-compatible routes and the operational ones (/health, /metrics).
void HttpServer::install_routes(Impl* impl) {
  auto& server = impl->server;
  server.Post("/v1/chat/completions", [impl](const httplib::Request& request, httplib::Response& response) {
    answer_completion(Endpoint::chat_completions, request, response, impl->context);
  });
  server.Post("/v1/completions", [impl](const httplib::Request& request, httplib::Response& response) {
    answer_completion(Endpoint::completions, request, response, impl->context);
  });
  server.Get("/v1/models", [impl](const httplib::Request&, httplib::Response& response) {
    response.set_content(dump_json(models_json(impl->model.name, impl->created)), "application/json");
  });
  server.Get("/v1/models/(.+)", [impl](const httplib::Request& request, httplib::Response& response) {
    const std::string name = request.matches[1];
    if (name != impl->model.name) {
      send_error(response, ApiError(404, str("the model '", name, "' does not exist here; this server serves '",
                                             impl->model.name, "'"),
                                    "model", "model_not_found"));
      return;
    }
    response.set_content(dump_json(models_json(impl->model.name, impl->created)["data"][0]), "application/json");
  });
  server.Get("/health", [impl](const httplib::Request&, httplib::Response& response) {
    if (impl->draining.load()) {
      response.status = 503;
      response.set_content("{\"status\":\"shutting down\"}", "application/json");
      return;
    }
    response.set_content("{\"status\":\"ok\"}", "application/json");
  });
  server.Get("/metrics", [impl](const httplib::Request&, httplib::Response& response) {
    response.set_content(impl->metrics.prometheus_text(), "text/plain; version=0.0.4");
  });
}

// Whatever httplib answers by itself, and exceptions, in OpenAI's error shape; every response counted.
void HttpServer::install_error_shapes(Impl* impl) {
  auto& server = impl->server;
  // httplib answers some requests by itself (no route: 404, a body past the limit: 413, a request it
  // cannot parse: 400) with an empty body; give those the OpenAI error shape too.
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    switch (response.status) {
      case 404:
        send_error(response, ApiError(404, str("no route ", request.method, " ", request.path,
                                               "; dew serve has POST /v1/chat/completions, POST /v1/completions, GET "
                                               "/v1/models, GET /health, GET /metrics"),
                                      "", "unknown_url"));
        break;
      case 413:
        send_error(response, ApiError(413, "the request body is larger than the server's limit (--max-body-bytes); send less", "",
                                      "request_too_large"));
        break;
      case 400:
        // httplib's own 400: a malformed request, or one whose headers or body did not arrive within
        // the read timeout.
        send_error(response, ApiError(400, "the HTTP request was malformed or did not arrive in full within the server's "
                                           "read timeout (--read-timeout); send the whole request at once", "",
                                      "malformed_request"));
        break;
      default:
        send_error(response, ApiError(response.status, str("the HTTP request could not be handled (status ", response.status, ")"),
                                      "", "", error_type_for_status(response.status)));
    }
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
    std::string what = "unknown error";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(response, ApiError(500, str("internal error: ", what), "", "internal_error", "server_error"));
  });
  server.set_logger([impl](const httplib::Request& request, const httplib::Response& response) {
    impl->metrics.record_request(endpoint_label(request.path), response.status);
  });
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  auto& s = *impl_;
  int port = s.options.port;
  if (port == 0) {
    port = s.server.bind_to_any_port(s.options.host);
    if (port < 0) fail("dew serve: cannot listen on ", s.options.host, " (any port); check --host");
  } else if (!s.server.bind_to_port(s.options.host, port)) {
    fail("dew serve: cannot listen on ", s.options.host, ":", port,
         " (in use, or not an address of this machine); pick another --port or --host (--port 0 picks a free one)");
  }
  return port;
}

void HttpServer::run() {
  impl_->server.listen_after_bind();
  impl_->run_returned.store(true);
}

void HttpServer::drain() { impl_->draining.store(true); }

bool HttpServer::wait_answered(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (impl_->context.in_flight.load() > 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::stop() {
  // httplib's stop() does nothing until listen_after_bind() has marked the server running; a signal that
  // arrives right after bind() (during start-up) must still end it, so wait for that, or for run() to
  // have returned by itself.
  while (!impl_->server.is_running() && !impl_->run_returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  impl_->server.stop();
}

}  // namespace dew::serve
