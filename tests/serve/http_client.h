// A tiny blocking HTTP/1.1 client over POSIX sockets for the serve tests (loopback only):
// enough to send exact bytes (malformed targets, huge headers, trickles) and read a response
// with Content-Length or chunked framing.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace frost::serve::testing {

struct RawResponse {
    int status = 0;  // 0: no response (connection closed or timed out)
    std::map<std::string, std::string> headers;  // lower-cased names
    std::string body;  // de-chunked
};

int connect_loopback(uint16_t port);  // -1 on failure
bool send_all(int fd, const std::string& bytes);
// Reads one response; gives up after timeout_ms.
RawResponse read_response(int fd, int timeout_ms = 10000);
// Reads raw bytes until `needle` appears or timeout; returns what was read.
std::string read_until(int fd, const std::string& needle, int timeout_ms);
// True when the peer closed the connection within timeout_ms.
bool wait_closed(int fd, int timeout_ms);
void close_fd(int fd);

// One request on a fresh connection. `key` empty: no Authorization header.
RawResponse http_request(uint16_t port, const std::string& method, const std::string& target,
                         const std::string& body = "", const std::string& key = "",
                         const std::vector<std::string>& extra_headers = {});

}  // namespace frost::serve::testing
