// Beast/Asio connection handling (see http_server.h). Each connection runs on its own strand;
// the engine thread reaches it only by posting a wake-up when its Channel has events.
#include "serve/http_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> under C++20.
#include <utility>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/resource.h>

#include "exec/error.h"
#include "serve/api.h"
#include "serve/api_error.h"
#include "serve/heap_refusal.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace frost::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

bool is_loopback_host(const std::string& host) {
    if (host == "localhost") return true;
    boost::system::error_code ec;
    const auto addr = net::ip::make_address(host, ec);
    return !ec && addr.is_loopback();
}

namespace {

constexpr size_t kWatchBytes = 4096;
constexpr int kHttpVersion11 = 11;

// A request the parser refused as malformed (bad or duplicate Content-Length, Content-Length
// with chunked, bad chunk size, bad bytes or bare LF in the head, a request line without an
// HTTP/1.x version...): answered 400 + Connection: close, never a silent close.
bool is_parse_error(const beast::error_code& ec) {
    if (ec.category() != http::make_error_code(http::error::bad_version).category()) return false;
    return ec != http::error::end_of_stream && ec != http::error::partial_message && ec != http::error::need_more &&
           ec != http::error::header_limit && ec != http::error::body_limit && ec != http::error::buffer_overflow;
}

}  // namespace

int parse_http_request(const std::string& bytes, size_t max_header_bytes, size_t max_body_bytes, std::string* method,
                       std::string* target, std::string* authorization, std::string* body) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(std::uint32_t(std::min<size_t>(max_header_bytes, UINT32_MAX)));
    parser.body_limit(max_body_bytes);
    parser.eager(true);
    beast::error_code ec;
    size_t used = 0;
    // The parser takes what it can per call, as a connection's reads feed it.
    while (!parser.is_done() && used < bytes.size()) {
        const size_t n = parser.put(net::buffer(bytes.data() + used, bytes.size() - used), ec);
        if (ec == http::error::need_more) {
            if (n == 0) return -1;
            ec = {};
        }
        if (ec == http::error::header_limit) return 431;
        if (ec == http::error::body_limit) return 413;
        if (ec) return 400;
        used += n;
        if (n == 0) break;
    }
    if (!parser.is_done()) {
        parser.put_eof(ec);
        if (ec && ec != http::error::partial_message) return 400;
        if (!parser.is_done()) return -1;
    }
    const auto& req = parser.get();
    if (req.version() != 10 && req.version() != kHttpVersion11) return 400;
    *method = std::string(req.method_string());
    *target = std::string(req.target());
    *authorization = std::string(req[http::field::authorization]);
    *body = req.body();
    return 0;
}

namespace {

constexpr int64_t kBusy = INT64_MAX;  // Connection::waiting_since() while a request is in flight

int64_t now_ticks() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// The server's count of open connections and the /metrics gauge move together, each by its
// own atomic step (a gauge copied from the count could be overwritten by a stale copy).
void count_open(std::atomic<size_t>& open, Metrics* m, bool opened) {
    if (opened) {
        open.fetch_add(1);
        if (m) m->connections_open.fetch_add(1);
    } else {
        open.fetch_sub(1);
        if (m) m->connections_open.fetch_sub(1);
    }
}

class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(tcp::socket sock, Api& api, Scheduler& sched, const ServerConfig& cfg, std::atomic<size_t>& open)
        : sock_(std::move(sock)), timer_(sock_.get_executor()), api_(api), sched_(sched), cfg_(cfg), open_(open) {
        count_open(open_, cfg_.metrics, true);
    }
    // Gone with a job still attached (its handler failed, see guarded): nobody reads its events,
    // so it stops at the engine's next round.
    ~Connection() {
        if (job_) job_->cancelled = true;
        if (!closed_) count_open(open_, cfg_.metrics, false);
    }

    void start() { read_header(); }

    void shutdown() {
        net::post(sock_.get_executor(), [self = shared_from_this()] { self->close(); });
    }

    // When this connection began waiting for its next request (steady_clock ticks; its header
    // or body still incomplete, or an idle keep-alive), kBusy while one is in flight. Read by
    // the acceptor, on another thread, to choose whom a new connection replaces at the cap.
    int64_t waiting_since() const { return evicting_.load() ? kBusy : waiting_since_.load(); }

    // The acceptor's eviction (T12): closes the connection on its own strand if it is still in
    // the wait that began at `seen`. A request that completed meanwhile is left alone (the
    // server is then one over its cap until a connection closes). False when another eviction
    // of this connection is already on its way.
    bool evict(int64_t seen) {
        if (evicting_.exchange(true)) return false;
        net::post(sock_.get_executor(), [self = shared_from_this(), seen] {
            if (!self->closed_ && self->waiting_since_.load() == seen) {
                if (self->cfg_.metrics) self->cfg_.metrics->connections_evicted++;
                self->close();
            }
            self->evicting_ = false;
        });
        return true;
    }

private:
    enum class Timeout { None, Header, Body, Send };

    // Runs one completion handler's work. An exception there (std::bad_alloc when the heap
    // refuses, T33) ends this connection, never the I/O thread: with the request's JSON error
    // (503 insufficient_memory, 500 otherwise) when no byte of its reply has gone out, else a
    // close, which an SSE client sees as the stream ending without [DONE].
    template <class F>
    void guarded(F&& work) {
        try {
            work();
        } catch (const std::exception&) {
            fail_connection();
        }
    }

    // Inside guarded's catch block (exception_reply reads the exception in flight).
    void fail_connection() {
        try {
            if (job_) {
                job_->cancelled = true;
                job_->channel->set_notify(nullptr);
                job_.reset();
                sched_.wake();
            }
            if (!closed_ && !writing_ && !header_sent_) {
                HttpOut e = api_.exception_reply();
                builder_.reset();
                on_final_ = nullptr;
                streaming_ = false;
                keep_alive_ = false;
                return write_simple(e.status, e.content_type, std::move(e.body), e.headers);
            }
        } catch (const std::exception&) {
            // no memory even for the error reply: the close below is all that is left
        }
        close();
    }

    void arm(int ms, Timeout what) {
        timed_out_ = Timeout::None;
        timer_.expires_after(std::chrono::milliseconds(ms));
        timer_.async_wait([self = shared_from_this(), what](beast::error_code ec) {
            if (ec) return;  // cancelled: the operation finished in time
            self->timed_out_ = what;
            beast::error_code ignored;
            self->sock_.cancel(ignored);
        });
    }
    void disarm() { timer_.cancel(); }

    void close() {
        if (closed_) return;
        closed_ = true;
        waiting_since_ = kBusy;
        count_open(open_, cfg_.metrics, false);
        if (job_) {
            job_->cancelled = true;
            sched_.wake();
        }
        disarm();
        beast::error_code ec;
        sock_.shutdown(tcp::socket::shutdown_both, ec);
        sock_.close(ec);
    }

    void read_header() {
        if (closed_) return;
        parser_.emplace();
        parser_->header_limit(std::uint32_t(cfg_.max_header_bytes));
        parser_->body_limit(cfg_.max_body_bytes);
        const size_t before = buffer_.size();
        waiting_since_ = now_ticks();
        arm(cfg_.header_timeout_ms, Timeout::Header);
        http::async_read_header(sock_, buffer_, *parser_,
                                [self = shared_from_this(), before](beast::error_code ec, size_t n) {
                                    self->guarded([&] { self->on_header(ec, before + n); });
                                });
    }

    void on_header(beast::error_code ec, size_t got) {
        if (closed_) return;
        if (ec) {
            disarm();
            if (ec == http::error::header_limit) return reply_and_close(431, "request header fields too large");
            if (timed_out_ == Timeout::Header && (got > 0 || buffer_.size() > 0))
                return reply_and_close(408, "request timeout");
            if (ec == http::error::body_limit) return reply_and_close(413, "request body too large");
            if (is_parse_error(ec)) return reply_and_close(400, ("malformed HTTP request: " + ec.message()).c_str());
            return close();
        }
        const auto& req = parser_->get();
        // HTTP/1.0 and 1.1 only (an HTTP/2 preface "PRI * HTTP/2.0" parses as a request line).
        if (req.version() != 10 && req.version() != kHttpVersion11) {
            disarm();
            return reply_and_close(400, "malformed HTTP request: only HTTP/1.0 and HTTP/1.1 are served");
        }
        if (req[http::field::content_length].size() > 0 && parser_->content_length() &&
            *parser_->content_length() > cfg_.max_body_bytes) {
            disarm();
            return reply_and_close(413, "request body too large");
        }
        if (beast::iequals(req[http::field::expect], "100-continue")) {
            // curl and others wait for this before sending a large body.
            static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            arm(cfg_.send_timeout_ms, Timeout::Send);
            net::async_write(sock_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code e, size_t) {
                self->disarm();
                if (e) return self->close();
                self->guarded([&] { self->read_body(); });
            });
            return;
        }
        read_body();
    }

    void read_body() {
        arm(cfg_.body_timeout_ms, Timeout::Body);
        http::async_read(sock_, buffer_, *parser_, [self = shared_from_this()](beast::error_code e, size_t) {
            self->guarded([&] { self->on_body(e); });
        });
    }

    void on_body(beast::error_code ec) {
        if (closed_) return;
        disarm();
        if (ec) {
            if (ec == http::error::body_limit) return reply_and_close(413, "request body too large");
            if (timed_out_ == Timeout::Body) return reply_and_close(408, "request timeout");
            if (is_parse_error(ec)) return reply_and_close(400, ("malformed HTTP request: " + ec.message()).c_str());
            return close();
        }
        waiting_since_ = kBusy;  // a whole request: from here on the connection is never evicted
        auto& req = parser_->get();
        keep_alive_ = req.keep_alive();
        HttpIn in;
        in.method = std::string(req.method_string());
        // HEAD is GET without the body (same status and headers, Content-Length of the body).
        head_ = in.method == "HEAD";
        if (head_) in.method = "GET";
        in.target = std::string(req.target());
        in.authorization = std::string(req[http::field::authorization]);
        in.x_api_key = std::string(req["x-api-key"]);
        in.anthropic_version = std::string(req["anthropic-version"]);
        in.arrival = std::chrono::steady_clock::now();
        in.body = std::move(req.body());
        HttpOut out = api_.handle(in);
        if (out.on_engine) {
            // Made on the engine thread between steps; this thread goes back to its other
            // connections and writes the reply when it is posted back.
            auto self = shared_from_this();
            auto exec = sock_.get_executor();
            sched_.post_control([self, exec, fn = std::move(out.on_engine)](CapsuleStore& s, ClaimLog& l) {
                // On the engine thread: the reply is made and posted back whatever happens, or
                // the connection would wait for it forever (T33).
                std::shared_ptr<HttpOut> reply;
                try {
                    reply = std::make_shared<HttpOut>(fn(s, l));
                } catch (const std::exception&) {
                    retry_while_heap_refuses([&] { reply = std::make_shared<HttpOut>(self->api_.exception_reply()); });
                }
                retry_while_heap_refuses([&] {
                    net::post(exec, [self, reply] {
                        if (self->closed_) return;
                        self->guarded([&] {
                            self->write_simple(reply->status, reply->content_type, std::move(reply->body),
                                               reply->headers);
                        });
                    });
                });
            });
            return;
        }
        if (!out.job) return write_simple(out.status, out.content_type, std::move(out.body), out.headers);
        job_ = out.job;
        end_observed_ = false;
        builder_ = std::move(out.builder);
        on_final_ = std::move(out.on_final);
        streaming_ = out.stream && !on_final_;
        std::weak_ptr<Connection> weak = shared_from_this();
        auto exec = sock_.get_executor();
        job_->channel->set_notify([weak, exec] {
            if (auto self = weak.lock()) net::post(exec, [self] { self->guarded([&] { self->pump(); }); });
        });
        watch();
        if (streaming_) start_stream();
        else pump();
    }

    // While a request runs, a pending read reports the client going away (EOF/reset).
    void watch() {
        watching_ = true;
        sock_.async_read_some(buffer_.prepare(kWatchBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
            self->watching_ = false;
            if (self->closed_) return;
            if (!ec) {
                self->buffer_.commit(n);  // pipelined bytes: kept for the next request
                if (self->job_) return self->guarded([&] { self->watch(); });
                return self->guarded([&] { self->after_job(); });
            }
            if (ec == net::error::operation_aborted && !self->job_) return self->guarded([&] { self->after_job(); });
            if (ec == net::error::operation_aborted && self->timed_out_ == Timeout::Send) return self->close();
            if (ec == net::error::operation_aborted) return;
            self->close();  // client gone: cancels the job
        });
    }

    void start_stream() {
        auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, kHttpVersion11);
        res->set(http::field::content_type, "text/event-stream");
        res->set(http::field::cache_control, "no-cache");
        for (const auto& [k, v] : api_.reply_headers()) res->set(k, v);
        res->keep_alive(keep_alive_);
        res->chunked(true);
        auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
        writing_ = true;
        arm(cfg_.send_timeout_ms, Timeout::Send);
        http::async_write_header(sock_, *sr, [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
            self->disarm();
            self->writing_ = false;
            if (ec) return self->close();
            self->header_sent_ = true;
            self->guarded([&] {
                self->out_ = self->builder_->sse_open();
                self->pump();
            });
        });
    }

    void pump() {
        if (closed_ || writing_ || !job_ || (streaming_ && !header_sent_)) return;
        bool drained = false;
        if (on_final_) {  // a job answered by one reply made from its final event
            std::optional<StreamEvent> last;
            while (auto ev = job_->channel->try_pop())
                if (ev->kind == StreamEvent::Kind::Finish || ev->kind == StreamEvent::Kind::Error) last = std::move(ev);
            sched_.wake();
            if (!last) return;
            finish_job();
            const HttpOut r = on_final_(*last);
            on_final_ = nullptr;
            return write_simple(r.status, r.content_type, r.body, r.headers);
        }
        while (auto ev = job_->channel->try_pop()) {
            drained = true;
            if (streaming_) out_ += builder_->sse(*ev);
            else builder_->add(*ev);
        }
        if (drained) sched_.wake();  // the engine may have been waiting for room
        if (!streaming_) {
            if (!builder_->done()) return;
            finish_job();
            if (builder_->failed()) {
                HttpOut e = api_.error_reply(builder_->error());
                e.body = builder_->error_json(builder_->error());
                return write_simple(e.status, e.content_type, e.body, e.headers);
            }
            return write_simple(200, "application/json", builder_->final_json(), {});
        }
        if (!out_.empty()) {
            // These bytes carry the last event: a client that has read them may scrape /metrics
            // at once, so the request's end-to-end latency is in before they go out.
            if (builder_->done()) observe_end_once();
            auto data = std::make_shared<std::string>(std::move(out_));
            out_.clear();
            writing_ = true;
            arm(cfg_.send_timeout_ms, Timeout::Send);
            net::async_write(sock_, http::make_chunk(net::buffer(*data)),
                             [self = shared_from_this(), data](beast::error_code ec, size_t) {
                                 self->disarm();
                                 self->writing_ = false;
                                 if (ec) return self->close();  // includes the send timeout
                                 self->guarded([&] { self->pump(); });
                             });
            return;
        }
        if (builder_->done()) {
            finish_job();
            writing_ = true;
            arm(cfg_.send_timeout_ms, Timeout::Send);
            net::async_write(sock_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
                self->disarm();
                self->writing_ = false;
                if (ec || !self->keep_alive_ || self->builder_->failed()) return self->close();
                self->builder_.reset();
                self->guarded([&] { self->after_job(); });
            });
        }
    }

    void observe_end_once() {
        if (!job_ || end_observed_) return;
        api_.observe_end(*job_);
        end_observed_ = true;
    }

    void finish_job() {
        if (job_) {
            observe_end_once();
            job_->channel->set_notify(nullptr);
        }
        job_.reset();
    }

    // Next request, once the disconnect watch has been withdrawn.
    void after_job() {
        if (closed_ || job_ || writing_) return;
        if (watching_) {
            beast::error_code ec;
            sock_.cancel(ec);  // the watch completes with operation_aborted and calls back here
            return;
        }
        if (!keep_alive_) return close();
        read_header();
    }

    void write_simple(int status, const std::string& content_type, std::string body,
                      const std::vector<std::pair<std::string, std::string>>& headers) {
        if (head_) {
            head_ = false;
            auto res = std::make_shared<http::response<http::empty_body>>(http::status(status), kHttpVersion11);
            res->set(http::field::content_type, content_type);
            for (const auto& [k, v] : api_.reply_headers()) res->set(k, v);
            for (const auto& [k, v] : headers) res->set(k, v);
            res->keep_alive(keep_alive_);
            res->content_length(body.size());
            writing_ = true;
            arm(cfg_.send_timeout_ms, Timeout::Send);
            auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
            http::async_write_header(sock_, *sr, [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
                self->disarm();
                self->writing_ = false;
                if (ec || !self->keep_alive_) return self->close();
                self->guarded([&] { self->after_job(); });
            });
            return;
        }
        auto res = std::make_shared<http::response<http::string_body>>(http::status(status), kHttpVersion11);
        res->set(http::field::content_type, content_type);
        for (const auto& [k, v] : api_.reply_headers()) res->set(k, v);
        for (const auto& [k, v] : headers) res->set(k, v);
        res->keep_alive(keep_alive_);
        res->body() = std::move(body);
        res->prepare_payload();
        writing_ = true;
        arm(cfg_.send_timeout_ms, Timeout::Send);
        http::async_write(sock_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
            self->disarm();
            self->writing_ = false;
            if (ec || !self->keep_alive_) return self->close();
            self->guarded([&] { self->after_job(); });
        });
    }

    void reply_and_close(int status, const char* msg) {
        keep_alive_ = false;
        ApiError e = make_error(status, "invalid_request_error",
                                status == 408 ? "timeout" : status == 400 ? "malformed_request" : "limit_exceeded", msg);
        write_simple(status, "application/json", api_error_body(e), {});
    }

    tcp::socket sock_;
    net::steady_timer timer_;
    Api& api_;
    Scheduler& sched_;
    const ServerConfig& cfg_;
    std::atomic<size_t>& open_;
    std::atomic<int64_t> waiting_since_{kBusy};
    std::atomic<bool> evicting_{false};
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    Timeout timed_out_ = Timeout::None;
    bool closed_ = false;
    bool keep_alive_ = true;
    bool writing_ = false;
    bool watching_ = false;
    bool streaming_ = false;
    bool header_sent_ = false;
    bool end_observed_ = false;  // job_'s end-to-end latency is recorded (once, before its last bytes)
    bool head_ = false;  // the request was HEAD: the reply carries no body
    std::shared_ptr<Job> job_;
    std::unique_ptr<BodyBuilder> builder_;
    std::function<HttpOut(const StreamEvent&)> on_final_;
    std::string out_;
};

}  // namespace

struct HttpServer::Impl {
    Impl(Api& a, Scheduler& s, ServerConfig c)
        : api(a), sched(s), cfg(std::move(c)), accept_strand(net::make_strand(ioc)), acceptor(accept_strand),
          accept_pause(accept_strand) {}

    void accept() {
        acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket sock) {
            if (ec) {
                if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
                if (out_of_descriptors(ec)) return pause_accepting();
                return accept();  // this client's failure only (ECONNABORTED and the like)
            }
            // Streamed tokens are small writes: with Nagle's algorithm on, each waits for the
            // client's delayed ACK of the previous one (~40 ms on Linux), which showed as a 30-40 ms
            // p99 inter-token latency at every batch size (stream_bench, H100, 2026-11-24).
            beast::error_code nodelay_ec;
            sock.set_option(tcp::no_delay(true), nodelay_ec);  // best effort: a refusal only costs latency
            try {
                // At the cap the connection that has waited longest for a request makes room
                // (a trickled header, an idle keep-alive): a flood of slow connections cannot
                // lock out clients that send whole requests (T12).
                if (open.load() >= cap && !evict_longest_waiting()) {
                    refuse(sock);
                } else {
                    auto c = std::make_shared<Connection>(std::move(sock), api, sched, cfg, open);
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        conns.erase(std::remove_if(conns.begin(), conns.end(), [](auto& w) { return w.expired(); }),
                                    conns.end());
                        conns.push_back(c);
                    }
                    c->start();
                }
            } catch (const std::exception&) {
                // The heap refused (T33): this client's socket closes; the next one is accepted.
            }
            // The acceptor must stay armed, or the server would never take a connection again.
            retry_while_heap_refuses([&] { accept(); });
        });
    }

    // accept(2) found no descriptor (EMFILE, ENFILE) or no kernel memory for the socket. The
    // client stays in the listen backlog, so accepting again at once would fail again at once:
    // a busy loop on an I/O thread (measured: 1.2 cores, and a 17 s wait for a normal client
    // behind 300 trickled headers at a limit of 128 descriptors). Instead the longest-waiting
    // connection is closed and accepting resumes after a short pause.
    static bool out_of_descriptors(const beast::error_code& ec) {
        return ec == net::error::no_descriptors || ec == net::error::no_buffer_space || ec == net::error::no_memory ||
               (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
    }

    void pause_accepting() {
        if (cfg.metrics) cfg.metrics->accept_pauses++;
        const bool freed = evict_longest_waiting();
        accept_pause.expires_after(std::chrono::milliseconds(freed ? 5 : 100));
        accept_pause.async_wait([this](beast::error_code ec) {
            if (ec || !acceptor.is_open()) return;
            accept();
        });
    }

    // Asks the connection that has waited longest for a request to close; false when every
    // connection has a request in flight.
    bool evict_longest_waiting() {
        std::lock_guard<std::mutex> lock(mu);
        for (;;) {
            std::shared_ptr<Connection> victim;
            int64_t oldest = kBusy;
            for (auto& w : conns)
                if (auto c = w.lock()) {
                    const int64_t t = c->waiting_since();
                    if (t < oldest) oldest = t, victim = std::move(c);
                }
            if (!victim) return false;
            if (victim->evict(oldest)) return true;
        }
    }

    // Every connection busy with a request: this one gets 503 and is closed. One non-blocking
    // write of a short reply (it fits any socket buffer), so a client that never reads costs
    // nothing; the request bytes that already came are read first, or the close would reset the
    // connection and could destroy the reply before the client reads it.
    void refuse(tcp::socket& sock) {
        if (cfg.metrics) cfg.metrics->connections_refused++;
        const std::string body = api_error_body(make_error(
            503, "server_error", "too_many_connections",
            "every connection the server takes (" + std::to_string(cap) + ") has a request in flight; retry later"));
        const std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                                  "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        beast::error_code ec;
        sock.non_blocking(true, ec);
        net::write(sock, net::buffer(reply), ec);
        sock.shutdown(tcp::socket::shutdown_send, ec);
        char sink[4096];
        for (int i = 0; i < 16 && !ec; ++i) sock.read_some(net::buffer(sink), ec);
        sock.close(ec);
    }

    // An I/O thread. Handlers catch their own exceptions (Connection::guarded); one that still
    // escapes run() (from Asio or Beast themselves) has lost only its own operation, so the
    // thread goes back to the loop instead of ending the process.
    void run_io() {
        for (;;) {
            try {
                ioc.run();
                return;
            } catch (const std::exception&) {
            }
        }
    }

    Api& api;
    Scheduler& sched;
    ServerConfig cfg;
    // Before ioc: a connection still held by a handler when ioc is destroyed counts itself out.
    std::atomic<size_t> open{0};      // connections open
    size_t cap = 0;                   // at most this many (cfg.max_connections resolved)
    net::io_context ioc;
    // The acceptor, its pause timer and stop()'s close run on one strand: the accept handler
    // re-arms the acceptor on whichever I/O thread runs it, and a close from another thread raced
    // with that (ThreadSanitizer, 2026-12-05).
    net::strand<net::io_context::executor_type> accept_strand;
    tcp::acceptor acceptor;
    net::steady_timer accept_pause;  // accepting resumes when it fires (out_of_descriptors)
    std::vector<std::thread> threads;
    std::mutex mu;
    std::vector<std::weak_ptr<Connection>> conns;
    uint16_t port = 0;
    bool started = false;
};

namespace {
// The descriptor limit less what the rest of the server needs open at once (capsule files, the
// claim log, the model), at most kDefaultMaxConnections: eviction scans every connection, and
// more concurrent clients than that is not what one inference server is for.
constexpr size_t kDefaultMaxConnections = 4096;
size_t default_max_connections() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kDefaultMaxConnections;
    const size_t fds = size_t(lim.rlim_cur);
    const size_t room = fds > 2 * ServerConfig::kFdReserve ? fds - ServerConfig::kFdReserve : fds / 2;
    return std::clamp<size_t>(room, 1, kDefaultMaxConnections);
}
}  // namespace

HttpServer::HttpServer(Api& api, Scheduler& sched, ServerConfig cfg)
    : impl_(std::make_unique<Impl>(api, sched, std::move(cfg))) {}

HttpServer::~HttpServer() { stop(); }

frost_status HttpServer::start() {
    Impl& m = *impl_;
    if (!m.cfg.have_api_key && !is_loopback_host(m.cfg.host))
        return fail(FROST_ERR_INVALID_ARG,
                    "refusing to listen on non-loopback host %s without an API key (pass --api-key)", m.cfg.host.c_str());
    boost::system::error_code ec;
    const std::string host = m.cfg.host == "localhost" ? "127.0.0.1" : m.cfg.host;
    const auto addr = net::ip::make_address(host, ec);
    if (ec) return fail(FROST_ERR_INVALID_ARG, "bad host '%s': %s", m.cfg.host.c_str(), ec.message().c_str());
    const tcp::endpoint ep(addr, m.cfg.port);
    m.acceptor.open(ep.protocol(), ec);
    if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) m.acceptor.bind(ep, ec);
    if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return fail(FROST_ERR_IO, "cannot listen on %s:%u: %s", m.cfg.host.c_str(), unsigned(m.cfg.port),
                        ec.message().c_str());
    m.port = m.acceptor.local_endpoint().port();
    m.cap = m.cfg.max_connections > 0 ? m.cfg.max_connections : default_max_connections();
    m.accept();
    for (int i = 0; i < std::max(1, m.cfg.io_threads); ++i) m.threads.emplace_back([&m] { m.run_io(); });
    m.started = true;
    return FROST_OK;
}

uint16_t HttpServer::port() const { return impl_->port; }

size_t HttpServer::max_connections() const { return impl_->cap; }

void HttpServer::stop() {
    Impl& m = *impl_;
    if (!m.started) return;
    m.started = false;
    net::post(m.accept_strand, [&m] {
        beast::error_code ec;
        m.acceptor.close(ec);
        m.accept_pause.cancel();
    });
    {
        std::lock_guard<std::mutex> lock(m.mu);
        for (auto& w : m.conns)
            if (auto c = w.lock()) c->shutdown();
    }
    // Give the posted closes a moment to run, then stop the loop outright.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    m.ioc.stop();
    for (auto& t : m.threads) t.join();
    m.threads.clear();
}

}  // namespace frost::serve
