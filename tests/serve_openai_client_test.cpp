// `dew serve` driven by the real PyPI `openai` client (tests/openai_client_check.py): chat, streaming with
// usage, log-probabilities, completions, and errors raised as the client's own exceptions. The client lives
// in the test venv scripts/setup.sh makes ($DEW_CACHE/venv-test, a pinned openai). A missing venv fails the
// test, naming the set-up step; DEW_SKIP_PYTHON_TESTS=1 skips it on machines without Python packages.
#include <gtest/gtest.h>

#include <cstdlib>

#include "serve_test_server.h"

namespace fs = std::filesystem;

namespace {
fs::path test_venv_python() {
  fs::path cache;
  if (const char* c = std::getenv("DEW_CACHE"); c && *c) cache = c;
  else cache = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache" / "dew";
  return cache / "venv-test" / "bin" / "python";
}
}  // namespace

TEST(ServeOpenAIClient, ChatStreamingCompletionsLogprobsAndErrors) {
  if (const char* skip = std::getenv("DEW_SKIP_PYTHON_TESTS"); skip && std::string(skip) == "1") {
    GTEST_SKIP() << "DEW_SKIP_PYTHON_TESTS=1";
  }
  auto python = test_venv_python();
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: run scripts/setup.sh (it makes the test venv with the "
                                  << "pinned openai client), or set DEW_SKIP_PYTHON_TESTS=1 to skip the Python tests";
  dew::test::ServeProcess server("'" + dew::test::tiny_chat_gguf().string() + "' --api-key client-key");
  ASSERT_GT(server.port(), 0) << server.output();
  auto script = dew::test::fixtures().parent_path() / "openai_client_check.py";
  auto result = dew::test::run_command("'" + python.string() + "' '" + script.string() + "' --base-url http://127.0.0.1:" +
                                       std::to_string(server.port()) + "/v1 --api-key client-key --model llama");
  EXPECT_EQ(result.status, 0) << result.output << "\n--- server ---\n" << server.output();
  EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(30)), 0) << server.output();
}
