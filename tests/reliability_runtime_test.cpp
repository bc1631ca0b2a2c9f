// Issue 8, the runtime part: sampling options the parser accepts never crash the sampler (extreme
// temperatures and penalties stay finite, NaN logits are an error), options that make no sense are
// refused by name, every user error exits 1, and Ctrl-C ends generate, eval and chat at once (130), a
// second Ctrl-C ends training, even where SIGINT was inherited ignored.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/formats/safetensors.h"
#include "dew/inference/generate.h"
#include "dew/inference/sampling.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::inference::Sampler;
using dew::inference::Sampling;
using dew::test::error_of;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

// tests/fixtures/lm/llama: vocabulary 64, context 32.
dew::nn::CausalTransformer fixture_model() {
  dew::nn::CausalTransformerConfig config;
  auto dir = dew::test::fixtures() / "lm" / "llama";
  dew::config::from_json(dew::config::parse_json_file(dir / "config.json"), config, (dir / "config.json").string());
  dew::nn::CausalTransformer model(config);
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dir / "weights.safetensors"));
  return model;
}

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

std::string dew_on_tiny(const std::string& command, const std::string& args) {
  return dew::test::dew_single_threaded(command + " '" + tiny_gguf().string() + "' " + args);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// --- the sampler on values the parser accepts ---------------------------------------------------------

TEST(ReliabilityRuntime, TemperatureNearZeroPicksTheGreedyToken) {
  at::manual_seed(5);
  auto logits = at::randn({8, 64}) * 3;
  const auto greedy = logits.argmax(-1);
  for (double temperature : {1e-300, 4.9e-324, 1e-30}) {
    SCOPED_TRACE(temperature);
    Sampling s;
    s.temperature = temperature;
    s.seed = 7;
    auto processed = dew::inference::process_logits(logits, {}, s);
    // The best token is at 0 (its logit minus the max), the others at -inf: never NaN, never +inf.
    EXPECT_FALSE(at::isnan(processed).any().item<bool>());
    EXPECT_FALSE(at::isposinf(processed).any().item<bool>());
    EXPECT_TRUE(processed.gather(1, greedy.unsqueeze(1)).eq(0).all().item<bool>());
    Sampler sampler(s, 8);
    EXPECT_TRUE(sampler.pick(processed).equal(greedy)) << sampler.pick(processed);
  }
  // A huge temperature is uniform, still finite.
  Sampling hot;
  hot.temperature = 1e300;
  auto processed = dew::inference::process_logits(logits, {}, hot);
  EXPECT_TRUE(at::isfinite(processed).all().item<bool>());
  EXPECT_EQ(processed.abs().max().item<float>(), 0.0f);  // (x - max) / 1e300 rounds to 0 in fp32
}

TEST(ReliabilityRuntime, RepetitionPenaltyExtremesStayFinite) {
  // Seen: a positive, a zero and a negative logit; token 3 unseen.
  auto logits = at::tensor({2.0f, 0.0f, -1.0f, 1.5f}).view({1, 4});
  auto seen = at::tensor({1, 1, 1, 0}).to(at::kBool).view({1, 4});
  auto tiny = dew::inference::apply_repetition_penalty(logits, seen, 1e-300);
  ASSERT_TRUE(at::isfinite(tiny).all().item<bool>()) << tiny;  // 2 / 1e-300 and 0 / 1e-300 in fp32: inf, NaN
  EXPECT_EQ(tiny[0][0].item<float>(), FLT_MAX);
  EXPECT_EQ(tiny[0][1].item<float>(), 0.0f);
  EXPECT_EQ(tiny[0][2].item<float>(), 0.0f);  // -1e-300 rounds to -0 in fp32
  EXPECT_EQ(tiny[0][3].item<float>(), 1.5f);
  auto huge = dew::inference::apply_repetition_penalty(logits, seen, 1e300);
  ASSERT_TRUE(at::isfinite(huge).all().item<bool>()) << huge;
  EXPECT_EQ(huge[0][2].item<float>(), -FLT_MAX);
  EXPECT_EQ(huge[0][3].item<float>(), 1.5f);  // now the best token

  // Through the whole chain and a draw: a valid token every time, greedy or sampled.
  for (double penalty : {1e-300, 1e300}) {
    for (double temperature : {0.0, 1.0, 1e-300}) {
      SCOPED_TRACE(::testing::Message() << "penalty " << penalty << " temperature " << temperature);
      Sampling s;
      s.repetition_penalty = penalty;
      s.temperature = temperature;
      s.top_p = 0.9;
      s.min_p = 0.1;
      Sampler sampler(s, 1);
      auto id = sampler.pick(dew::inference::process_logits(logits, seen, s)).item<std::int64_t>();
      EXPECT_EQ(id, penalty < 1 ? 0 : 3);  // the penalty decides; the temperatures here keep the best
    }
  }
}

TEST(ReliabilityRuntime, NonFiniteLogitsAreAnErrorNotATokenPastTheVocabulary) {
  Sampling s;
  s.seed = 1;
  Sampler sampler(s, 2);
  auto logits = at::zeros({2, 16});
  logits[1][3] = std::numeric_limits<float>::quiet_NaN();
  // Before: searchsorted on a NaN cumulative sum returned 16, an id outside the vocabulary.
  EXPECT_TRUE(contains(error_of([&] { sampler.pick(logits); }), "no token of positive probability"));

  // A model whose weights hold NaN: generate names the step, the weights, and returns no tokens.
  auto model = fixture_model();
  {
    at::NoGradGuard no_grad;
    model->output_weight().fill_(std::numeric_limits<float>::quiet_NaN());
  }
  for (double temperature : {0.0, 1.0}) {
    Sampling greedy;
    greedy.temperature = temperature;
    greedy.max_new_tokens = 3;
    auto message = error_of([&] { dew::inference::generate(model, {{1, 2, 3}}, greedy); });
    EXPECT_TRUE(contains(message, "the model produced non-finite logits at step 1 of generation; its weights may hold NaN/Inf"))
        << message;
  }
}

TEST(ReliabilityRuntime, SettingsThatMakeNoSenseAreRefusedByTheirFlag) {
  auto refused = [](auto edit, const std::string& expected) {
    Sampling s;
    edit(s);
    auto message = error_of([&] { s.validate(Sampling::Names::flags); });
    EXPECT_TRUE(contains(message, expected)) << message;
  };
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  refused([&](Sampling& s) { s.temperature = nan; }, "--temperature is nan");
  refused([&](Sampling& s) { s.temperature = inf; }, "--temperature is inf");
  refused([&](Sampling& s) { s.temperature = -1; }, "--temperature is -1");
  refused([&](Sampling& s) { s.top_p = nan; }, "--top-p is nan");
  refused([&](Sampling& s) { s.min_p = nan; }, "--min-p is nan");
  refused([&](Sampling& s) { s.repetition_penalty = inf; }, "--repetition-penalty is inf");
  refused([&](Sampling& s) { s.repetition_penalty = nan; }, "--repetition-penalty is nan");
  refused([&](Sampling& s) { s.top_k = -1; }, "--top-k is -1");
  refused([&](Sampling& s) { s.max_new_tokens = 0; }, "--max-new-tokens is 0");
  refused([&](Sampling& s) { s.n = Sampling::kMaxContinuations + 1; }, "--n is 1048577; use at most 1048576");
  Sampling config;
  config.top_p = nan;
  EXPECT_TRUE(contains(error_of([&] { config.validate(); }), "sampling.top_p is nan"));
}

TEST(ReliabilityRuntime, HugeRequestsAreRefusedBeforeAllocating) {
  auto model = fixture_model();
  Sampling s;
  s.max_new_tokens = std::numeric_limits<std::int64_t>::max();  // prompt length + this overflowed
  auto message = error_of([&] { dew::inference::generate(model, {{1, 2}}, s); });
  EXPECT_TRUE(contains(message, "exceed the model's max_seq_len of 32")) << message;

  // 4096 prompts times 2^20 continuations: 2^32 rows, far past any machine's memory.
  s.max_new_tokens = 4;
  s.n = Sampling::kMaxContinuations;
  std::vector<std::vector<std::int32_t>> prompts(4096, std::vector<std::int32_t>{1});
  message = error_of([&] { dew::inference::generate(model, prompts, s); });
  EXPECT_TRUE(contains(message, "4294967296 rows")) << message;
  EXPECT_TRUE(contains(message, " GiB available (")) << message;
}

// --- through the binary -----------------------------------------------------------------------------

TEST(ReliabilityRuntime, ExtremeSamplingFlagsWorkOrAreRefusedWithExitOne) {
  auto tokens_of = [](const std::string& output) {
    return nlohmann::json::parse(output.substr(output.find('{')))["tokens"].get<std::vector<int>>();
  };
  auto greedy = run_command(dew_on_tiny("generate", "--prompt 'The capital' --max-new-tokens 6 --no-eos --json"));
  ASSERT_EQ(greedy.status, 0) << greedy.output;
  auto cold = run_command(dew_on_tiny("generate", "--prompt 'The capital' --max-new-tokens 6 --no-eos --json --temperature 1e-300"));
  ASSERT_EQ(cold.status, 0) << cold.output;  // before: internal error and a LibTorch stack trace
  EXPECT_EQ(tokens_of(cold.output), tokens_of(greedy.output));
  for (const char* flags : {"--repetition-penalty 1e-300", "--repetition-penalty 1e300 --temperature 1e-300 --top-p 0.5 --min-p 0.5",
                            "--max-new-tokens 9223372036854775807 --repetition-penalty 1e-300 --temperature 0.7"}) {
    auto r = run_command(dew_on_tiny("generate", std::string("--prompt 'The capital' --no-eos --json ") + flags));
    ASSERT_EQ(r.status, 0) << flags << ": " << r.output;
    EXPECT_FALSE(tokens_of(r.output).empty()) << flags;
  }

  // Refused at the option, before the model loads, naming it; exit 1 like every other user error.
  const std::pair<const char*, const char*> refused[] = {
      {"--temperature nan", "--temperature is nan"},
      {"--temperature -1", "--temperature is -1"},
      {"--top-p 0", "--top-p is 0"},
      {"--min-p nan", "--min-p is nan"},
      {"--top-k -1", "--top-k is -1"},
      {"--n 0", "--n is 0"},
      {"--max-new-tokens 0", "--max-new-tokens is 0; use at least 1"},  // after loading: 0 is for masked models only
      {"--seed -1", "'-1' is negative"},  // before: 2^64 - 1
      {"--temperature abc", "--temperature"},  // a CLI11 parse error: before, status 105
      {"--no-such-flag", "--no-such-flag"},
  };
  for (const auto& [flags, message] : refused) {
    auto r = run_command(dew_on_tiny("generate", std::string("--prompt hi ") + flags));
    EXPECT_EQ(r.status, 1) << flags << ": " << r.output;
    EXPECT_TRUE(contains(r.output, message)) << flags << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << flags << ": " << r.output;
  }
  auto missing = run_command(dew::test::dew_single_threaded("generate"));  // a required argument missing
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_EQ(run_command(dew::test::dew_single_threaded("generate --help")).status, 0);

  // An explicitly empty --prompt is refused; before, chat went interactive on it.
  auto empty = run_command(dew_on_tiny("chat", "--prompt '' < /dev/null"));
  EXPECT_EQ(empty.status, 1) << empty.output;
  EXPECT_TRUE(contains(empty.output, "--prompt is empty")) << empty.output;
  auto chat_flag = run_command(dew_on_tiny("chat", "--prompt hi --temperature nan"));
  EXPECT_EQ(chat_flag.status, 1) << chat_flag.output;
  EXPECT_TRUE(contains(chat_flag.output, "--temperature is nan")) << chat_flag.output;
}

// --- Ctrl-C -----------------------------------------------------------------------------------------

namespace {

// Runs `dew_command` in the background of a non-interactive shell, as a script would: it inherits SIGINT
// ignored. Once it runs dew and `ready` (a shell condition) holds, sends SIGINT every 0.1 s while the process lives
// (`repeat`: signals that come before the command installs its handler are ignored) or once. A watchdog
// kills it after 20 s. Returns the exit status and the output. Background jobs write nowhere near the
// pipe run_command reads, which would otherwise stay open until they end.
dew::test::CommandResult interrupted(const std::string& dew_command, const fs::path& log, const std::string& ready,
                                     bool repeat) {
  const std::string script =
      dew_command + " > '" + log.string() + "' 2>&1 &\n"
      "pid=$!\n"
      "( sleep 20; kill -9 $pid ) > /dev/null 2>&1 &\n"
      "watchdog=$!\n"
      // Until the child has exec'd dew: before, it is a copy of this shell, where SIGINT still kills.
      "i=0; until readlink /proc/$pid/exe | grep -q '" + dew::test::dew_binary().filename().string() + "$' || [ $i -ge 400 ]; do sleep 0.01; i=$((i+1)); done\n"
      "i=0; until " + ready + " || [ $i -ge 400 ]; do sleep 0.05; i=$((i+1)); done\n" +
      (repeat ? "while kill -INT $pid 2>/dev/null; do sleep 0.1; done\n" : "kill -INT $pid\n") +
      "wait $pid; status=$?\n"
      "kill $watchdog 2>/dev/null\n"
      "exit $status\n";
  fs::path script_file = log.string() + ".sh";
  dew::test::write_text(script_file, script);
  auto result = run_command("sh '" + script_file.string() + "'");
  result.output += dew::test::read_text(log);
  return result;
}

}  // namespace

TEST(ReliabilityRuntime, CtrlCEndsGenerateAndChatAtOnce) {
  TempDir dir;
  // 40000 rows of 53 tokens: over half a minute uninterrupted.
  auto generate = interrupted(dew_on_tiny("generate", "--prompt hi --prompt 'The capital of France' --n 20000 "
                                                      "--max-new-tokens 60 --no-eos --temperature 1"),
                              dir / "generate.log", "true", /*repeat=*/true);
  EXPECT_EQ(generate.status, 130) << generate.output;  // before: SIGINT ignored, killed by the watchdog
  EXPECT_TRUE(contains(generate.output, "dew: interrupted")) << generate.output;

  // Interactive chat waiting for a line that never comes: its stdin is a FIFO the shell holds open.
  ASSERT_EQ(::mkfifo((dir / "in").c_str(), 0600), 0);
  auto chat = interrupted("exec 3<> '" + (dir / "in").string() + "'; " + dew_on_tiny("chat", "") + " <&3", dir / "chat.log",
                          "grep -q 'chatting with' '" + (dir / "chat.log").string() + "'", /*repeat=*/true);
  EXPECT_EQ(chat.status, 130) << chat.output;
}

TEST(ReliabilityRuntime, CtrlCEndsEvalAtOnceAndStopsTrainingWithACheckpoint) {
  TempDir work;
  // 600 KB of bytes, half of it validation: evaluating it whole takes minutes on this model.
  std::string text;
  while (text.size() < 600000) text += "Once upon a time there was a little house by the sea. ";
  dew::test::write_text(work / "corpus.txt", text);
  auto tokens = work / "tokens";
  auto tokenized = run_command(dew::test::dew_single_threaded("tokenize --input '" + (work / "corpus.txt").string() +
                                                              "' --out '" + tokens.string() + "' --val-fraction 0.5"));
  ASSERT_EQ(tokenized.status, 0) << tokenized.output;
  const std::string model =
      " --set model.emb_features=128 --set model.num_layers=4 --set model.num_heads=4 --set model.max_seq_len=128"
      " --set data.seq_len=128 --set trainer.batch_size=8 --set trainer.log_every=1 --set trainer.eval_every=0"
      " --set trainer.eval_batches=1 --set trainer.checkpoint_every=0 --set trainer.peak_flops=1e9"
      " --set trainer.device=cpu";

  // One SIGINT (inherited ignored, as in a script): the step finishes, a checkpoint is written, 130.
  auto run = work / "run";
  auto log = work / "train.log";
  auto train = interrupted(dew::test::dew_single_threaded("train lm --data '" + tokens.string() + "' --out '" +
                                                          run.string() + "'" + model + " --set trainer.steps=1000000"),
                           log, "grep -q '^step 1/' '" + log.string() + "'", /*repeat=*/false);
  EXPECT_EQ(train.status, 130) << train.output;
  EXPECT_TRUE(contains(train.output, "stopped by signal 2")) << train.output;
  int checkpoints = 0;
  for (const auto& entry : fs::directory_iterator(run)) {
    if (fs::exists(entry.path() / "params.safetensors")) ++checkpoints;
  }
  EXPECT_EQ(checkpoints, 1);

  // eval over the whole validation split, interrupted.
  auto eval = interrupted(dew::test::dew_single_threaded("eval '" + run.string() + "'"), work / "eval.log", "true",
                          /*repeat=*/true);
  EXPECT_EQ(eval.status, 130) << eval.output;  // before: SIGINT ignored, killed by the watchdog
  EXPECT_FALSE(contains(eval.output, "perplexity")) << eval.output;
}

// A second SIGINT while the graceful stop is pending ends the process, also where SIGINT was ignored
// before the run (before: the previous disposition, SIG_IGN, was restored and the signal re-raised
// into it, so the run went on). In a child process, which has one thread until the watcher starts, so
// the signals sent to the process can only be taken by the watcher.
TEST(ReliabilityRuntime, SecondSignalForceQuitsTraining) {
  for (auto inherited : {SIG_IGN, SIG_DFL}) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::signal(SIGINT, inherited);
      {
        dew::GracefulStop stop("dew: second interrupt, quitting without a checkpoint");  // as the Trainer's
        ::kill(::getpid(), SIGINT);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!stop.requested() && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (stop.signal() != SIGINT) ::_exit(3);  // the first signal only asks for a stop
        ::kill(::getpid(), SIGINT);
        for (int i = 0; i < 1000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ended within 10 s
      }
      ::_exit(0);  // the second signal was ignored
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 130) << (inherited == SIG_IGN ? "SIGINT ignored before" : "default SIGINT");
  }
}
