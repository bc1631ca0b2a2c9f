#pragma once
// Helpers for the tests that drive `dew serve` as a process: start it on a free port (--port 0, reading the
// "listening on" line), send it signals, read its output; raw sockets for requests an HTTP client will
// not send (half a request, a lying Content-Length); and a tiny model with a long context, so a request
// can be kept running while a test does something else.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "wait_until.h"

namespace dew::test {

class ServeProcess {
 public:
  // `args`: what follows `dew serve` (MODEL and flags; --port 0 is added).
  explicit ServeProcess(const std::string& args, const std::string& env = "") {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::string command = "exec env DEW_THREADS=1 " + env + " '" + dew_binary().string() + "' serve " + args + " --port 0";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buffer[4096];
      for (;;) {
        ssize_t n = ::read(fd, buffer, sizeof(buffer));
        std::lock_guard lock(mutex_);
        if (n <= 0) {
          closed_ = true;
          changed_.notify_all();
          break;
        }
        output_.append(buffer, static_cast<std::size_t>(n));
        changed_.notify_all();
      }
      ::close(fd);
    });
    const std::string marker = "listening on http://127.0.0.1:";
    if (wait_for_output(marker, std::chrono::seconds(120))) {
      auto text = output();
      port_ = std::stoi(text.substr(text.find(marker) + marker.size()));
    }
  }

  ~ServeProcess() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  int port() const { return port_; }  // 0 when the server did not start (see output())
  std::string output() {
    std::lock_guard lock(mutex_);
    return output_;
  }
  bool running() const { return pid_ > 0 && !exited_; }
  // Waits until the output holds `text` (true), or the process closed its output or `timeout` passed (false).
  bool wait_for_output(const std::string& text, std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return closed_ || output_.find(text) != std::string::npos; });
    return output_.find(text) != std::string::npos;
  }

  // Sends `signal` and waits up to `timeout` for the exit; the exit status, or -1 when it had to be killed.
  int stop(int signal, std::chrono::seconds timeout) {
    ::kill(pid_, signal);
    return wait_exit(timeout);
  }
  int wait_exit(std::chrono::seconds timeout) {
    int status = 0;
    if (wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout, std::chrono::milliseconds(50))) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    exited_ = true;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string output_;
  bool closed_ = false;
};

// A TCP connection to 127.0.0.1:port for hand-made requests.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() { close(); }
  bool connected() const { return fd_ >= 0; }
  bool send(const std::string& bytes) {
    return fd_ >= 0 && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Reads until the peer closes or `timeout` passes; `closed` says which.
  std::string read_all(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    if (closed) *closed = false;
    while (fd_ >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      timeval tv{static_cast<time_t>(left.count() / 1000), static_cast<suseconds_t>((left.count() % 1000) * 1000)};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buffer[4096];
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (closed) *closed = true;
        break;
      }
      if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The tiny llama GGUF fixture (tokenizer and chat template from llama.cpp's converter; a 64-token context).
inline std::filesystem::path tiny_chat_gguf() { return fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

// The same model as a Hugging Face directory with a 32768-token context (RoPE has no length limit), made
// once per test run: a request for 30000 tokens keeps generating for a minute or more (about 3000 tokens/s
// at first, slower as attention grows), so a test can act while it runs.
inline std::filesystem::path tiny_long_context_model() {
  static TempDir dir;
  static std::filesystem::path made;
  if (!made.empty()) return made;
  auto hf = dir.path() / "tiny-long";
  auto exported = run_command(dew_single_threaded("export '" + tiny_chat_gguf().string() + "' '" + hf.string() + "'"));
  if (exported.status != 0) throw std::runtime_error("dew export failed: " + exported.output);
  auto config = nlohmann::json::parse(read_text(hf / "config.json"));
  config["max_position_embeddings"] = 32768;
  write_text(hf / "config.json", config.dump(2));
  made = hf;
  return made;
}

}  // namespace dew::test
