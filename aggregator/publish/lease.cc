#include "aggregator/publish/lease.h"

#include <unistd.h>
// The synchronous calls of the multi-threaded client (libzookeeper_mt).
#define THREADED
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace fieldprof::aggregator {
namespace {

class Sole : public Lease {
 public:
  bool Held() override { return true; }
  std::string Describe() override { return "held (one aggregator)"; }
};

class ZooKeeper : public Lease {
 public:
  ZooKeeper(std::string servers, std::string path, std::chrono::milliseconds session)
      : servers_(std::move(servers)), path_(std::move(path)), session_(session) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    me_ = std::string(host) + ":" + std::to_string(getpid());
  }

  ~ZooKeeper() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

  // Waits until a session is up (or `timeout`).
  bool WaitConnected(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return connected_once_ || stop_; }) &&
           connected_once_;
  }

  bool Held() override { return held_.load(); }

  std::string Describe() override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

 private:
  void Say(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = std::move(s);
  }

  // Creates every component of `path_` that is missing.
  bool EnsurePath(zhandle_t* zh) {
    for (size_t at = 1; at <= path_.size(); ++at) {
      if (at != path_.size() && path_[at] != '/') continue;
      const std::string part = path_.substr(0, at);
      const int rc = zoo_create(zh, part.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) {
        Say("cannot create " + part + ": " + zerror(rc));
        return false;
      }
    }
    return true;
  }

  // True when asked to stop within `wait`.
  bool StopWithin(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, wait, [this] { return stop_; });
  }

  // Whether *zh is a session connected now, making one if there is none
  // (a new session clears *node: the old node went with the old session).
  bool Connected(zhandle_t** zh, std::string* node) {
    if (*zh == nullptr) {
      *zh = zookeeper_init(servers_.c_str(), nullptr, static_cast<int>(session_.count()), nullptr,
                           nullptr, 0);
      node->clear();
      if (*zh == nullptr) {
        held_ = false;
        Say("cannot start a ZooKeeper client for " + servers_);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return false;
      }
    }
    const int state = zoo_state(*zh);
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
      // A new session, a new node: the old one is gone with its session.
      held_ = false;
      Say("session expired; reconnecting");
      zookeeper_close(*zh);
      *zh = nullptr;
      return false;
    }
    if (state != ZOO_CONNECTED_STATE) {
      held_ = false;  // cannot know: give it up until connected again
      Say("not held: not connected to ZooKeeper (" + servers_ + ")");
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_once_) {
      connected_once_ = true;
      cv_.notify_all();
    }
    return true;
  }

  // Joins the election: an ephemeral sequential member node, its name in
  // *node.
  bool Join(zhandle_t* zh, std::string* node) {
    if (!EnsurePath(zh)) {
      held_ = false;
      return false;
    }
    char made[512] = {};
    const std::string prefix = path_ + "/member-";
    const int rc =
        zoo_create(zh, prefix.c_str(), me_.data(), static_cast<int>(me_.size()),
                   &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made - 1);
    if (rc != ZOK) {
      held_ = false;
      Say(std::string("cannot join the election: ") + zerror(rc));
      return false;
    }
    *node = std::string(made).substr(path_.size() + 1);
    return true;
  }

  // The lowest member holds the lease.
  void Look(zhandle_t* zh, std::string* node) {
    String_vector children{};
    const int rc = zoo_get_children(zh, path_.c_str(), 0, &children);
    if (rc != ZOK) {
      held_ = false;
      Say(std::string("not held: ") + zerror(rc));
      return;
    }
    std::vector<std::string> names(children.data, children.data + children.count);
    deallocate_String_vector(&children);
    std::sort(names.begin(), names.end());
    if (std::find(names.begin(), names.end(), *node) == names.end()) {
      node->clear();  // our node is gone (a session the server expired): join again
      held_ = false;
      return;
    }
    held_ = names.front() == *node;
    Say(held_ ? "held by this aggregator (" + *node + " of " + std::to_string(names.size()) + ")"
              : "held by another aggregator (" + names.front() + "; this one is " + *node + ")");
  }

  void Run() {
    zhandle_t* zh = nullptr;
    std::string node;  // our member node's name under path_, once made
    while (!StopWithin(std::chrono::milliseconds(zh == nullptr ? 0 : 200))) {
      if (!Connected(&zh, &node)) continue;
      if (node.empty() && !Join(zh, &node)) continue;
      Look(zh, &node);
    }
    held_ = false;
    if (zh != nullptr) zookeeper_close(zh);  // ends the session: our node goes at once
  }

  const std::string servers_, path_;
  const std::chrono::milliseconds session_;
  std::string me_;  // written into our node, for operators: host:pid
  std::atomic<bool> held_{false};
  std::mutex mu_;  // guards stop_, connected_once_, state_
  std::condition_variable cv_;
  bool stop_ = false;
  bool connected_once_ = false;
  std::string state_ = "not held: connecting";
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Lease> SoleLease() { return std::make_unique<Sole>(); }

StatusOr<std::unique_ptr<Lease>> OpenZooKeeperLease(const std::string& servers,
                                                    const std::string& path,
                                                    std::chrono::milliseconds session_timeout) {
  if (path.size() < 2 || path[0] != '/' || path.back() == '/' ||
      path.find("//") != std::string::npos) {
    return InvalidArgument("lease_path '" + path + "' must be an absolute ZooKeeper path");
  }
  if (servers.empty()) return InvalidArgument("--zookeeper is empty");
  static std::once_flag quiet;
  std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
  auto lease = std::make_unique<ZooKeeper>(servers, path, session_timeout);
  lease->Start();
  // Ingest needs no lease: an aggregator whose ZooKeeper is away starts
  // anyway, without the lease, and keeps trying.
  if (!lease->WaitConnected(session_timeout)) {
    std::fprintf(stderr,
                 "fieldprof-aggregator: no ZooKeeper session with %s yet; the lease waits for "
                 "one\n",
                 servers.c_str());
  }
  return std::unique_ptr<Lease>(std::move(lease));
}

}  // namespace fieldprof::aggregator
