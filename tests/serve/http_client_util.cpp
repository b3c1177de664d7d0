// Blocking loopback HTTP client for tests (see http_client.h).
#include "serve/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>

namespace frost::serve::testing {

namespace {
using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : int(left);
}

// Appends whatever arrives within the deadline; false on timeout or close.
bool read_more(int fd, std::string& buf, Clock::time_point deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
    char tmp[65536];
    const ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf.append(tmp, size_t(n));
    return true;
}
}  // namespace

int connect_loopback(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

RawResponse read_response(int fd, int timeout_ms) {
    RawResponse r;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string buf;
    size_t hdr_end;
    while ((hdr_end = buf.find("\r\n\r\n")) == std::string::npos)
        if (!read_more(fd, buf, deadline)) return r;
    const std::string head = buf.substr(0, hdr_end);
    std::string rest = buf.substr(hdr_end + 4);
    if (head.size() < 12) return r;
    r.status = std::atoi(head.c_str() + 9);
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos + 2 < head.size()) {
        const size_t next = head.find("\r\n", pos + 2);
        const std::string line = head.substr(pos + 2, (next == std::string::npos ? head.size() : next) - pos - 2);
        const size_t colon = line.find(':');
        if (colon != std::string::npos) {
            std::string name = line.substr(0, colon);
            for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
            size_t v = colon + 1;
            while (v < line.size() && line[v] == ' ') ++v;
            r.headers[name] = line.substr(v);
        }
        pos = next;
    }
    if (r.headers.count("content-length")) {
        const size_t len = std::stoul(r.headers["content-length"]);
        while (rest.size() < len)
            if (!read_more(fd, rest, deadline)) break;
        r.body = rest.substr(0, len);
        return r;
    }
    if (r.headers["transfer-encoding"] == "chunked") {
        size_t off = 0;
        for (;;) {
            size_t crlf;
            while ((crlf = rest.find("\r\n", off)) == std::string::npos)
                if (!read_more(fd, rest, deadline)) return r;
            const size_t len = std::stoul(rest.substr(off, crlf - off), nullptr, 16);
            while (rest.size() < crlf + 2 + len + 2)
                if (!read_more(fd, rest, deadline)) return r;
            if (len == 0) return r;
            r.body += rest.substr(crlf + 2, len);
            off = crlf + 2 + len + 2;
        }
    }
    while (read_more(fd, rest, deadline)) {
    }
    r.body = rest;
    return r;
}

std::string read_until(int fd, const std::string& needle, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string buf;
    while (buf.find(needle) == std::string::npos)
        if (!read_more(fd, buf, deadline)) break;
    return buf;
}

bool wait_closed(int fd, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
        char tmp[4096];
        const ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
        if (n <= 0) return true;
    }
}

void close_fd(int fd) {
    if (fd >= 0) ::close(fd);
}

RawResponse http_request(uint16_t port, const std::string& method, const std::string& target, const std::string& body,
                         const std::string& key, const std::vector<std::string>& extra_headers) {
    const int fd = connect_loopback(port);
    if (fd < 0) return {};
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!key.empty()) req += "Authorization: Bearer " + key + "\r\n";
    for (const auto& h : extra_headers) req += h + "\r\n";
    if (!body.empty() || method == "POST") {
        req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n" + body;
    RawResponse r;
    if (send_all(fd, req)) r = read_response(fd);
    ::close(fd);
    return r;
}

}  // namespace frost::serve::testing
