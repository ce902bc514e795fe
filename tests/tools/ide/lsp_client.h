// The editor's side of the language server, for tests and benchmarks:
// `fieldprof lsp` as a child process on two pipes, framed JSON-RPC.
#ifndef FIELDPROF_TESTS_TOOLS_IDE_LSP_CLIENT_H_
#define FIELDPROF_TESTS_TOOLS_IDE_LSP_CLIENT_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fieldprof::testing {

using json = nlohmann::json;

class LspClient {
 public:
  explicit LspClient(const std::vector<std::string>& args) {
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    in_ = to[1];
    out_ = from[0];
  }
  ~LspClient() {
    if (in_ >= 0) close(in_);
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }

  static std::string Frame(const std::string& body) {
    return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  void SendRaw(const std::string& body) { SendFrames(Frame(body)); }
  // Several messages in one write(2), as a fast client's burst arrives.
  void SendTogether(const std::vector<json>& messages) {
    std::string frames;
    for (const json& m : messages) frames += Frame(m.dump());
    SendFrames(frames);
  }
  void SendFrames(const std::string& frame) {
    size_t done = 0;
    while (done < frame.size()) {
      const ssize_t n = write(in_, frame.data() + done, frame.size() - done);
      if (n <= 0) {
        problem = "the server's input is closed";
        return;
      }
      done += static_cast<size_t>(n);
    }
  }
  void Notify(const std::string& method, const json& params) {
    SendRaw(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}}.dump());
  }
  int Request(const std::string& method, const json& params) {
    const int id = next_id_++;
    SendRaw(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump());
    return id;
  }
  // The response to `id`; every message before it is kept in `seen`.
  json Await(const json& id) {
    while (true) {
      json m = Next();
      if (m.is_null()) return m;
      if (m.contains("id") && m["id"] == id && !m.contains("method")) return m;
      seen.push_back(m);
    }
  }
  json Call(const std::string& method, const json& params) {
    return Await(Request(method, params));
  }
  // Waits for a window/logMessage containing `text`.
  bool AwaitLog(const std::string& text) {
    for (const json& m : seen) {
      if (m.value("method", "") == "window/logMessage" &&
          m["params"]["message"].get<std::string>().find(text) != std::string::npos) {
        return true;
      }
    }
    while (true) {
      json m = Next();
      if (m.is_null()) return false;
      seen.push_back(m);
      if (m.value("method", "") == "window/logMessage" &&
          m["params"]["message"].get<std::string>().find(text) != std::string::npos) {
        return true;
      }
    }
  }
  // Closes stdin's pipe and waits: the exit code.
  int Exit() {
    close(in_);
    in_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<json> seen;
  std::string problem;  // what went wrong, if anything (tests check it is empty)

 private:
  // One frame from the server; null at the end or after 60 s (a hang).
  // Anything on stdout that is not a frame fails the test.
  json Next() {
    while (true) {
      const size_t head = buf_.find("\r\n\r\n");
      if (head != std::string::npos) {
        const std::string header = buf_.substr(0, head);
        if (header.rfind("Content-Length: ", 0) != 0) {
          problem = "not a frame on the server's stdout: " + header;
          return nullptr;
        }
        const size_t len = std::stoul(header.substr(16));
        if (buf_.size() >= head + 4 + len) {
          json m = json::parse(buf_.substr(head + 4, len));
          buf_.erase(0, head + 4 + len);
          return m;
        }
      }
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 60000) <= 0) {
        problem = "no message from the server in 60 s";
        return nullptr;
      }
      char chunk[65536];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return nullptr;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int next_id_ = 1;
  bool waited_ = false;
  std::string buf_;
};

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_TOOLS_IDE_LSP_CLIENT_H_
