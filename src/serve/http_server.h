// HTTP/1.1 transport for the API on Boost.Beast/Asio (the only translation unit that includes
// Beast, since it compiles slowly). Header <= 64 KiB (431), body <= max_body (413), a header
// and body read timeout (408 when some bytes came, silent close on an idle keep-alive), a send
// timeout per write (a slow reader is dropped and its request cancelled), and a watch on the
// socket while a request runs so a client disconnect cancels it at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "frost/exec.h"

namespace frost::serve {

class Api;
class Scheduler;
struct Metrics;

struct ServerConfig {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;  // 0: pick an ephemeral port (tests)
    size_t max_header_bytes = 64 * 1024;
    size_t max_body_bytes = 8 * 1024 * 1024;
    int header_timeout_ms = 10000;  // whole header (and body) must arrive within this
    int body_timeout_ms = 30000;
    int send_timeout_ms = 10000;    // one write to the client
    int io_threads = 2;
    bool have_api_key = false;      // without one, only loopback binds are allowed (T37)
    // Open connections at most (T12). At the cap a new connection takes the place of the one
    // that has waited longest for its next request (an idle keep-alive, a trickled header or
    // body), or, when every connection has a request in flight, is answered 503
    // too_many_connections + Retry-After. 0: the descriptor limit (RLIMIT_NOFILE) less
    // kFdReserve, which capsule files, the claim log and the model need.
    size_t max_connections = 0;
    static constexpr size_t kFdReserve = 64;
    // Counted in /metrics when set: connections open, evicted, refused, accept pauses.
    Metrics* metrics = nullptr;
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

// One request head + body parsed from `bytes` by the same parser and rules a connection uses
// (header and body limits, HTTP/1.x only, malformed framing refused), without a socket: for the
// fuzzer and tests. Returns the status the server would answer without routing (0 = parsed:
// *method / *target / *authorization / *body are set; 400 malformed, 413 body or 431 header too
// large; -1 = the bytes end before the request does).
int parse_http_request(const std::string& bytes, size_t max_header_bytes, size_t max_body_bytes, std::string* method,
                       std::string* target, std::string* authorization, std::string* body);

class HttpServer {
public:
    HttpServer(Api& api, Scheduler& sched, ServerConfig cfg);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts the I/O threads. FROST_ERR_INVALID_ARG for a non-loopback host without
    // an API key; FROST_ERR_IO when the address cannot be bound.
    frost_status start();
    uint16_t port() const;
    size_t max_connections() const;  // the cap in force (after start: 0 resolved)
    // Stops accepting and closes every connection; joins the I/O threads. Idempotent.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace frost::serve
