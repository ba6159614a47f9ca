#include "actors/rdma_node.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdlib>

#include "actors/detail/manager_events.h"
#include "actors/detail/node_objects.h"
#include "actors/environment.h"
#include "actors/plain_transport.h"
#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_messages.h"
#include "actors/tls_transport.h"
#include "primitives/log.h"

namespace caf_rdma {

namespace {
/// Polls of an idle CAF work-stealing worker per microsecond of busy polling (see start()).
constexpr size_t kPollsPerMicrosecond = 20;
}  // namespace

Result<NodeOptions> NodeOptions::from_env() {
  NodeOptions o;
  CAF_RDMA_ASSIGN_OR_RETURN(o.manager, ManagerOptions::from_env());
  return o;
}

Result<std::unique_ptr<RdmaNode>> RdmaNode::start() {
  auto options = NodeOptions::from_env();
  if (!options.ok())
    return options.error().with_context("starting a node");
  return start(*options);
}

Result<std::unique_ptr<RdmaNode>> RdmaNode::start(const NodeOptions& options) {
  if (const char* level = std::getenv(kEnvLog); level != nullptr && *level != '\0')
    if (auto parsed = parse_log_level(level); !parsed.ok())
      return parsed.error().with_context("starting a node");
  MetricsOptions metrics = options.metrics;
  if (!metrics.enabled) {
    auto from_env = MetricsOptions::from_env();
    if (!from_env.ok())
      return from_env.error().with_context("starting a node");
    metrics = *from_env;
  }
  std::unique_ptr<RdmaNode> node(new RdmaNode());
  node->config_ = std::make_unique<caf::actor_system_config>();
  add_message_types(*node->config_);
  node->config_->load<caf::io::middleman>();
  TlsCredentials tls = options.tls.any() ? options.tls : tls_credentials_from_env();
  const char* plain_env = std::getenv(kEnvPlaintext);
  bool plaintext_ok =
      options.allow_plaintext || (plain_env != nullptr && std::string(plain_env) == "1");
  TlsContext tls_context;
  if (tls.any()) {
    if (Status st = check_tls_credentials(tls); !st.ok())
      return st.error().with_context("starting a node with TLS on " + options.host);
    auto ctx = tls_stream_context(tls);
    if (!ctx.ok())
      return ctx.error().with_context("starting a node with TLS on " + options.host);
    tls_context = *ctx;
    node->tls_ = true;
  } else if (!is_loopback_host(options.host) && !plaintext_ok) {
    return Error(ErrorCode::kInvalidArgument,
                 "refusing to publish the RDMA manager on " + options.host +
                     " without TLS: every process that reaches it could use the peer protocol "
                     "and read or change the traffic. Give the node a certificate (" +
                     kEnvTlsCertificate + ", " + kEnvTlsKey + ", " + kEnvTlsCaFile +
                     ", or NodeOptions::tls), or accept plaintext on a trusted network (" +
                     kEnvPlaintext + "=1 or NodeOptions::allow_plaintext)");
  }
  node->connect_timeout_ = options.connect_timeout;
  // An automatic connection would open a second listener, plaintext, on every interface.
  node->config_->set("middleman.enable-automatic-connections", false);
  if (options.scheduler_threads > 0)
    node->config_->set("scheduler.max-threads", options.scheduler_threads);
  if (const char* policy = std::getenv(kEnvScheduler); policy != nullptr && *policy) {
    // Only CAF's two real schedulers: its "testing" one runs nothing by itself (a node started
    // with it would wait for ever), and an unknown name would be CAF's to misread.
    const std::string p(policy);
    if (p != "stealing" && p != "sharing")
      return Error(ErrorCode::kInvalidArgument,
                   std::string("starting a node: ") + kEnvScheduler + "=" + p +
                       " is no scheduler caf-rdma runs on: choose stealing (CAF's default) or "
                       "sharing");
    node->config_->set("scheduler.policy", caf::atom_from_string(p));
  }
  if (const auto busy = static_cast<size_t>(options.manager.busy_poll.count()); busy > 0) {
    // Busy polling (ManagerOptions::busy_poll): a work-stealing worker that ran out of jobs
    // polls its queue without sleeping for about the window (kPollsPerMicrosecond: what one
    // poll costs on a current x86 core; CAF counts polls, not time) before it sleeps, and the
    // node's RdmaClients read the window from the system's settings.
    node->config_->set("work-stealing.moderate-sleep-duration", caf::timespan{0});
    node->config_->set("work-stealing.moderate-poll-attempts", busy * kPollsPerMicrosecond);
    caf::put(node->config_->content, kBusyPollSetting, busy);
  }
  if (options.configure)
    options.configure(*node->config_);
  node->system_ = std::make_unique<caf::actor_system>(*node->config_);
  node->host_ = options.host;
  // With TLS, connections are made and accepted by our own middleman actor (tls_transport.h):
  // CAF 0.17's OpenSSL module drops healthy links and spins on silent ones.
  if (node->tls_) {
    TlsTransportOptions t;
    t.context = tls_context;
    t.connect_timeout = options.connect_timeout;
    t.accept.handshake_timeout = options.connect_timeout;
    node->connector_ = spawn_tls_middleman(*node->system_, std::move(t));
  } else {
    // Without TLS too: a connection budget on the published port, connects with a deadline
    // (plain_transport.h).
    PlainTransportOptions p;
    p.silent_timeout = options.connect_timeout;
    p.connect_timeout = options.connect_timeout;
    node->connector_ = spawn_plain_middleman(*node->system_, p);
  }
  // Published first (port 0: the OS picks one, no one else can take it in between), then named
  // host:port: the name reaches the manager before anyone can know the port.
  ManagerOptions mo = options.manager;
  const bool name_it = mo.name.empty();
  mo.named_later = name_it;
  // The stream channel announces the node's address; a wildcard is no address a peer can use.
  if (mo.stream_host.empty() && options.host != "0.0.0.0" && !options.host.empty())
    mo.stream_host = options.host == "localhost" ? "127.0.0.1" : options.host;
  if (node->tls_)
    mo.stream_tls = tls;  // the stream channel speaks TLS with the node's credentials
  auto mgr = spawn_manager(*node->system_, mo);
  if (!mgr.ok()) {
    node->stop_connector();
    return mgr.error();
  }
  node->manager_ = *mgr;
  // What peers see is the manager's facade (actors/peer_facade.h): the manager itself is never
  // published nor serialized, so no message from the network can reach it.
  rdma_manager_actor facade;
  {
    caf::scoped_actor self{*node->system_};
    self->request(caf::actor_cast<caf::actor>(node->manager_), std::chrono::seconds(30),
                  detail::GetFacade{})
        .receive([&](caf::actor& f) { facade = caf::actor_cast<rdma_manager_actor>(std::move(f)); },
                 [&](caf::error&) {});
  }
  if (!facade) {
    caf::anon_send_exit(node->manager_, caf::exit_reason::user_shutdown);
    node->stop_connector();
    return Error(ErrorCode::kInternal, "the RDMA manager did not name its facade");
  }
  // Published through the node's middleman actor (plain_transport.h or tls_transport.h).
  auto port =
      node->publish_ptr(caf::actor_cast<caf::strong_actor_ptr>(facade),
                        node->system_->message_types(facade), options.port, "the RDMA manager");
  if (!port.ok()) {
    caf::anon_send_exit(node->manager_, caf::exit_reason::user_shutdown);
    node->stop_connector();
    return port.error();
  }
  node->port_ = *port;
  // Named as its manager is (HOST:PORT unless it has a name): the port is known now.
  report_environment(options.manager.name.empty() ? node->address() : options.manager.name,
                     options.manager.from_environment);
  if (metrics.enabled) {
    auto exporter =
        MetricsExporter::start(*node->system_, node->manager_, metrics, node->tls_, plaintext_ok);
    if (!exporter.ok()) {
      caf::anon_send_exit(node->manager_, caf::exit_reason::user_shutdown);
      node->stop_connector();
      return exporter.error().with_context("starting a node");
    }
    node->metrics_ = std::move(*exporter);
  }
  if (name_it)
    caf::anon_send(caf::actor_cast<caf::actor>(node->manager_), detail::SetName{node->address()});
  // Links to live peers that drop are made again through the same connector (ManagerState
  // invariant 13).
  caf::anon_send(caf::actor_cast<caf::actor>(node->manager_),
                 detail::UseConnector{node->connector_, options.connect_timeout});
  return node;
}

RdmaNode::~RdmaNode() {
  metrics_.reset();  // MetricsExporter invariant 3: no scrape asks the manager after this
  if (system_) {
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    manager_ = nullptr;
    stop_connector();
    // Clients and RegisteredBuffers of this node that still live hold actors of its system,
    // whose destructor would wait for them for ever: they turn inert, and the system is kept
    // (detail/node_objects.h).
    std::vector<std::string> alive = detail::node_objects_stop(*system_);
    if (!alive.empty()) {
      std::string names;
      for (const auto& a : alive)
        names += (names.empty() ? "" : ", ") + a;
      log_line(LogLevel::kError,
               "caf-rdma: RdmaNode %s destroyed while %zu object(s) of it lived: %s; they do "
               "nothing now (their calls fail), and the node's actor system stays until the "
               "process ends: destroy clients and RegisteredBuffers before their node",
               address().c_str(), alive.size(), names.c_str());
      detail::node_system_keep(std::move(config_), std::move(system_));
      return;
    }
    system_.reset();
  }
}

void RdmaNode::stop_connector() {
  // Ours (TLS or plain) ignores exit messages but `kill`, as CAF's does, and the system would
  // wait for it; its connect() is bounded by the connect timeout, so this wait is too.
  if (connector_) {
    caf::scoped_actor self{*system_};
    self->send_exit(connector_, caf::exit_reason::kill);
    self->wait_for(connector_);
  }
  connector_ = nullptr;
}

std::string RdmaNode::address() const {
  return host_ + ":" + std::to_string(port_);
}

Result<uint16_t> RdmaNode::publish_ptr(caf::strong_actor_ptr ptr, std::set<std::string> interfaces,
                                       uint16_t port, const std::string& what) {
  // The node's middleman actor (TLS or plain, our own) publishes: its answer is the port,
  // or why not.
  caf::expected<uint16_t> out{caf::error{}};
  {
    caf::scoped_actor self{*system_};
    self->request(connector_, std::chrono::seconds(30), caf::publish_atom::value, port,
                  std::move(ptr), std::move(interfaces), host_, true)
        .receive([&](uint16_t p) { out = p; }, [&](caf::error& e) { out = std::move(e); });
  }
  if (out)
    return *out;
  return Error(
      ErrorCode::kPeerUnavailable,
      "publishing " + what + " on " + host_ + ":" + std::to_string(port) + " failed: " +
          (error_code(out.error()) != ErrorCode::kInternal ? error_message(out.error())
                                                           : system_->render(out.error())));
}

namespace {

/// The actor published at host:port as `connector` (a middleman actor: CAF's, or the node's)
/// reaches it within `timeout`, and the interfaces it declares. Errors name `what` and where.
Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> connect_via(
    caf::actor_system& sys, const caf::io::middleman_actor& connector, const std::string& host,
    uint16_t port, std::chrono::milliseconds timeout, const std::string& what, bool tls) {
  std::string where = host + ":" + std::to_string(port) + (tls ? " (TLS)" : "");
  std::string cannot = "cannot reach " + what + " at " + where + ": ";
  Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> out =
      Error(ErrorCode::kPeerUnavailable, cannot + "no reply");
  caf::scoped_actor self{sys};
  self->request(connector, timeout, caf::connect_atom::value, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            if (!ptr)
              out = Error(ErrorCode::kPeerUnavailable, cannot + "no actor is published there");
            else
              out = std::make_pair(std::move(ptr), std::move(ifs));
          },
          [&](caf::error& e) {
            // The TLS connector's own errors (a refused certificate, no TLS answer in time)
            // keep their code; a timeout is `timeout`, as documented, on every path.
            if (error_code(e) != ErrorCode::kInternal) {
              out = Error(error_code(e), cannot + error_message(e));
              return;
            }
            bool timed_out = e == caf::sec::request_timeout;
            out = Error(timed_out ? ErrorCode::kTimeout : ErrorCode::kPeerUnavailable,
                        cannot + sys.render(e) +
                            (timed_out ? " (no answer within " + std::to_string(timeout.count()) +
                                             " ms: nothing there that speaks CAF, or a peer "
                                             "that turned our connection away)"
                                       : ""));
          });
  return out;
}

}  // namespace

Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> RdmaNode::connect_ptr(
    const std::string& host, uint16_t port, const std::string& what,
    std::chrono::milliseconds timeout) {
  return connect_via(*system_, connector_, host, port,
                     timeout.count() > 0 ? timeout : connect_timeout_, what, tls_);
}

Result<rdma_manager_actor> RdmaNode::remote_manager(const std::string& host, uint16_t port) {
  auto c = connect_ptr(host, port, "the RDMA manager");
  if (!c.ok())
    return c.error();
  if (c->first->node() == system_->node())
    return manager_;  // our own address: the manager, not the facade peers see
  return detail::published_as<rdma_manager_actor>(*system_, std::move(*c), host, port,
                                                  "an RDMA manager");
}

namespace detail {

Result<std::pair<caf::strong_actor_ptr, std::set<std::string>>> connect_published_ptr(
    caf::actor_system& sys, const std::string& host, uint16_t port,
    std::chrono::milliseconds timeout, const std::string& what) {
  return connect_via(sys, sys.middleman().actor_handle(), host, port, timeout, what, false);
}

std::string not_published_as_text(const std::string& host, uint16_t port, const std::string& what) {
  return "the actor published at " + host + ":" + std::to_string(port) + " is not " + what;
}

}  // namespace detail

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Result<std::pair<std::string, uint16_t>> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return Error(ErrorCode::kInvalidArgument, "'" + text + "' is not HOST:PORT");
  try {
    size_t used = 0;
    unsigned long p = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || p == 0 || p > 65535)
      throw std::out_of_range("port");
    return std::make_pair(text.substr(0, colon), static_cast<uint16_t>(p));
  } catch (const std::exception&) {
    return Error(ErrorCode::kInvalidArgument, "'" + text + "' has no valid port (1..65535)");
  }
}

}  // namespace caf_rdma
