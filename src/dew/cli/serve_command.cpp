// `dew serve MODEL`: an OpenAI-compatible HTTP server (chat completions, completions, models, health,
// metrics) over the step engine, for the MODEL `dew chat` takes (a run, a Hugging Face directory, a GGUF
// file). Binds loopback unless --host says otherwise. SIGINT/SIGTERM: stop taking requests, let the running
// ones finish within --shutdown-grace seconds (then cancel them), exit 0.
#include <ATen/Parallel.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dew/cli/commands.h"
#include "dew/cli/model_options.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/inference/engine.h"
#include "dew/runs/hub_cache.h"
#include "dew/serve/http_server.h"
#include "dew/serve/job_builder.h"
#include "dew/serve/server_metrics.h"
#include "dew/serve/serving_loop.h"

namespace dew::cli {

namespace {
constexpr std::int64_t kDefaultContext = 4096;

struct ServeFlags {
  ModelFlags model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::optional<std::string> api_key;
  std::int64_t max_batch = 16;
  std::int64_t max_queue = 64;
  std::int64_t context = 0;
  std::int64_t step_tokens = 512;
  bool no_prefix_cache = false;
  std::int64_t max_n = 16;
  std::optional<int> threads;
  std::string served_model_name;
  std::size_t max_body_bytes = 8u << 20;
  int read_timeout = 10;
  double shutdown_grace = 10;
};

// The model's id in the API: --served-model-name, else what MODEL names (a GGUF's file name without
// .gguf, a directory's last component, a Hub name's org/name), as clients usually write it.
std::string served_name(const ServeFlags& flags) {
  if (!flags.served_model_name.empty()) return flags.served_model_name;
  // A Hub name is served under that name (without @revision), as vLLM does.
  if (runs::names_hub_model(flags.model.model)) return runs::parse_hub_name(flags.model.model)->repo;
  std::filesystem::path path(flags.model.model);
  while (path.has_parent_path() && path.filename().empty()) path = path.parent_path();  // "dir/" -> "dir"
  std::string name = path.filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name.empty() ? flags.model.model : name;
}

void check_flags(const ServeFlags& f) {
  if (f.port < 0 || f.port > 65535) fail("--port is ", f.port, "; use 0 (any free port) to 65535");
  if (f.max_batch < 1) fail("--max-batch is ", f.max_batch, "; use at least 1 request decoding at once");
  if (f.max_queue < 0) fail("--max-queue is ", f.max_queue, "; use 0 (no queue: refuse when the batch is full) or more");
  if (f.context < 0) fail("--ctx is ", f.context, "; use 0 (the model's context) or a positive number of tokens");
  if (f.step_tokens < 1) fail("--step-tokens is ", f.step_tokens, "; use at least 1");
  if (f.max_n < 1) fail("--max-n is ", f.max_n, "; use at least 1");
  if (f.threads && *f.threads < 1) fail("--threads is ", *f.threads, "; use at least 1");
  if (f.read_timeout < 1) fail("--read-timeout is ", f.read_timeout, "; use at least 1 second");
  if (f.max_body_bytes < 1024) fail("--max-body-bytes is ", f.max_body_bytes, "; use at least 1024");
  if (!(f.shutdown_grace >= 0)) fail("--shutdown-grace is ", f.shutdown_grace, "; use 0 or more seconds");
  if (f.api_key && f.api_key->empty()) fail("--api-key is empty; give a key, or leave it out to serve without one");
}
// DEW_API_KEY when --api-key is not given. Set but empty is a key that went missing (an unset variable in
// a script, a secret not mounted), not a wish to serve without one: refused, as --api-key "" is.
std::optional<std::string> api_key_from_environment() {
  const char* env = std::getenv("DEW_API_KEY");
  if (!env) return std::nullopt;
  if (!*env) {
    fail("the environment variable DEW_API_KEY is set but empty; give it a key, or unset it (unset DEW_API_KEY) "
         "to serve without one");
  }
  return std::string(env);
}

// What a request that leaves a sampling field out gets: the checkpoint's recommendation (generation_config.json,
// GGUF metadata) where it makes one, else OpenAI's default. Said once on stderr so the operator knows.
serve::RequestDefaults request_defaults(const interop::GenerationDefaults& checkpoint) {
  serve::RequestDefaults out;
  if (checkpoint.empty()) return out;
  out.temperature = checkpoint.temperature.value_or(out.temperature);
  out.top_p = checkpoint.top_p.value_or(out.top_p);
  out.top_k = checkpoint.top_k.value_or(out.top_k);
  out.min_p = checkpoint.min_p.value_or(out.min_p);
  out.repetition_penalty = checkpoint.repetition_penalty.value_or(out.repetition_penalty);
  out.max_tokens = checkpoint.max_new_tokens;
  std::fprintf(stderr, "dew serve: requests that leave them out get temperature %g, top_p %g, top_k %lld, min_p %g, "
               "repetition_penalty %g%s (from %s)\n", out.temperature, out.top_p, static_cast<long long>(out.top_k),
               out.min_p, out.repetition_penalty,
               out.max_tokens ? str(", max_tokens ", *out.max_tokens).c_str() : "", checkpoint.source.c_str());
  return out;
}

// The shutdown: new completions get 503, running ones get `grace` seconds, then the rest are cancelled and
// the last events of their streams sent before the server stops.
void drain_and_stop(serve::HttpServer& http, serve::ServingLoop& loop, double grace) {
  http.drain();
  loop.close();
  if (!loop.wait_idle(std::chrono::milliseconds(static_cast<std::int64_t>(grace * 1000)))) {
    std::fprintf(stderr, "dew serve: cancelling %lld request(s) still running after the grace period\n",
                 static_cast<long long>(loop.outstanding()));
    loop.cancel_all();
    loop.wait_idle(std::chrono::seconds(5));
  }
  http.wait_answered(std::chrono::seconds(5));  // the last events of streams whose requests just ended
  http.stop();
}

// The flags of `dew serve` (the model's, then the server's), into `f`.
CLI::App* add_serve_flags(CLI::App& app, ServeFlags& f) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (chat completions, completions, models, health, metrics)");
  add_model_options(cmd, f.model);
  cmd->add_option("--host", f.host, "address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)");
  cmd->add_option("--port", f.port, "port to listen on; 0 picks a free one and prints it (8000)");
  cmd->add_option("--api-key", f.api_key, "require 'Authorization: Bearer KEY' on every request but /health (default: $DEW_API_KEY, else none)");
  cmd->add_option("--max-batch", f.max_batch, "requests decoding at once: KV-cache slots (16)");
  cmd->add_option("--max-queue", f.max_queue, "requests waiting for a slot before new ones get 429 (64)");
  cmd->add_option("--ctx", f.context, "tokens per request, prompt + completion; the KV cache holds max-batch x ctx "
                                     "(default: the model's context, at most 4096)");
  cmd->add_option("--step-tokens", f.step_tokens, "prompt + decode tokens one engine step may run (512)");
  cmd->add_flag("--no-prefix-cache", f.no_prefix_cache,
                "compute every prompt token, instead of copying the slots of a prompt prefix a cache row already holds");
  cmd->add_option("--max-n", f.max_n, "most choices (n) one request may ask for (16)");
  cmd->add_option("--threads", f.threads, "intra-op threads for the model (default: the cores this process may use, or DEW_THREADS)");
  cmd->add_option("--served-model-name", f.served_model_name, "the model's id in the API (default: MODEL's file or directory name)");
  cmd->add_option("--max-body-bytes", f.max_body_bytes, "largest request body; larger ones get 413 (8 MiB)")->check(refuse_negative);
  cmd->add_option("--read-timeout", f.read_timeout, "seconds a client may stall mid-request before the connection is dropped (10)");
  cmd->add_option("--shutdown-grace", f.shutdown_grace, "seconds running requests get to finish after SIGTERM/SIGINT, then they are cancelled (10)");
  return cmd;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = add_serve_flags(app, *flags);

  cmd->callback([flags] {
    auto& f = *flags;
    if (!f.api_key) f.api_key = api_key_from_environment();
    check_flags(f);
    // Before any thread exists (the model's loaders and LibTorch's pools inherit the mask): SIGTERM/SIGINT
    // wake signals.wait() below to drain and exit 0; a second one ends the server at once.
    exit_on_interrupt();
    GracefulStop signals("dew serve: second signal, exiting now");
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server
    auto loaded = load_model(f.model);
    if (f.threads) at::set_num_threads(*f.threads);
    const auto& config = loaded.model->config();
    if (!config.causal) {
      fail("'", f.model.model, "' is a masked-diffusion model (", loaded.description,
           "); dew serve runs causal decoders. Use `dew generate` for it");
    }
    // The cache is allocated whole at start: a model's full context (8192 for SmolLM2, 128k for others)
    // times the batch would take gigabytes nobody asked for, so the default stops at kDefaultContext.
    const std::int64_t context = f.context > 0 ? f.context : std::min(config.max_seq_len, kDefaultContext);
    inference::Engine engine(loaded.model, {.max_batch = f.max_batch, .context = context, .step_token_budget = f.step_tokens,
                                                 .prefix_cache = !f.no_prefix_cache});
    const double cache_gib = 2.0 * static_cast<double>(config.num_layers * config.resolved_kv_heads() * config.resolved_head_dim()) *
                             static_cast<double>(c10::elementSize(loaded.model->compute_dtype())) *
                             static_cast<double>(f.max_batch * context) / (1024.0 * 1024.0 * 1024.0);
    serve::ServedModel model{served_name(f), &loaded.tokenizer, config.vocab_size, context,
                             request_defaults(loaded.generation)};
    serve::ServerMetrics metrics;
    serve::ServingLoop loop(engine, metrics, f.max_batch + f.max_queue);
    serve::HttpOptions http_options{.host = f.host,
                                    .port = f.port,
                                    .api_key = f.api_key.value_or(""),
                                    .max_body_bytes = f.max_body_bytes,
                                    .read_timeout_seconds = f.read_timeout,
                                    .write_timeout_seconds = 10,
                                    // A thread per connection that can be streaming or waiting, plus room for
                                    // quick ones (health, refused requests, stalled clients until their timeout).
                                    .threads = static_cast<std::size_t>(f.max_batch + f.max_queue + 16)};
    serve::HttpServer http(model, loop, metrics, http_options,
                           {.max_n = f.max_n, .max_stop = 16, .max_prompts = 64});
    const int port = http.bind();
    std::fprintf(stderr, "dew serve: %s as '%s', context %lld tokens, max batch %lld (KV cache %.2f GiB), queue %lld%s\n",
                 loaded.description.c_str(), model.name.c_str(), static_cast<long long>(model.context),
                 static_cast<long long>(f.max_batch), cache_gib, static_cast<long long>(f.max_queue),
                 f.api_key ? ", API key required" : "");
    // One line on stdout that scripts and tests wait for.
    std::printf("dew serve: listening on http://%s:%d\n", f.host.c_str(), port);
    std::fflush(stdout);
    std::thread http_thread([&] {
      http.run();
      signals.end();  // stopped by itself (the listening socket failed): shut down the rest
    });
    const int signal = signals.wait();
    if (signal != 0) {
      std::fprintf(stderr, "dew serve: %s received; finishing %lld running request(s) within %g s\n",
                   signal == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(loop.outstanding()), f.shutdown_grace);
    }
    drain_and_stop(http, loop, f.shutdown_grace);
    http_thread.join();
    loop.stop();
    std::fprintf(stderr, "dew serve: stopped\n");
  });
}

}  // namespace dew::cli
