// The proxy's pure parts: allowlist entries (what parses, what is refused and why), matching
// (wildcards take subdomains only, ports match exactly, names are not addresses), request heads,
// and what a request is turned into.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proxy/addresses.hpp"
#include "proxy/proxy.hpp"
#include "test_support.hpp"

using pysandbox::proxy::Allowlist;
using pysandbox::proxy::Destination;
using pysandbox::proxy::ForwardPlan;
using pysandbox::proxy::parse_allow_rule;
using pysandbox::proxy::parse_destination;
using pysandbox::proxy::parse_request_head;
using pysandbox::proxy::plan_forward;
using pysandbox::proxy::Refusal;
using pysandbox::test::contains;
using pysandbox::test::message_of;

namespace {

std::string rule_error(const std::string& entry) {
    return message_of<std::invalid_argument>([&] { parse_allow_rule(entry); });
}

// Each destination is allowed by `rules` exactly when its flag says so.
void check_matches(const std::vector<std::string>& rules,
                   std::initializer_list<std::pair<const char*, bool>> cases) {
    const Allowlist allowlist = Allowlist::parse(rules);
    for (const auto& [destination, expected] : cases)
        CHECK_MESSAGE(allowlist.allows(parse_destination(destination)) == expected, destination);
}

std::variant<ForwardPlan, Refusal> plan_for(const std::string& head) {
    auto request = parse_request_head(head);
    REQUIRE(request.has_value());
    return plan_forward(*request);
}

// Whether a name may not lead to `text` (in the form getaddrinfo() returns it): forbidden_reason()
// with no host addresses of its own.
bool is_local(const char* text) {
    sockaddr_storage storage{};
    if (std::string_view(text).find(':') != std::string_view::npos) {
        auto& v6 = reinterpret_cast<sockaddr_in6&>(storage);
        v6.sin6_family = AF_INET6;
        REQUIRE(::inet_pton(AF_INET6, text, &v6.sin6_addr) == 1);
    } else {
        auto& v4 = reinterpret_cast<sockaddr_in&>(storage);
        v4.sin_family = AF_INET;
        REQUIRE(::inet_pton(AF_INET, text, &v4.sin_addr) == 1);
    }
    return !pysandbox::proxy::forbidden_reason(reinterpret_cast<const sockaddr&>(storage), {})
                .empty();
}

}  // namespace

TEST_SUITE("proxy allowlist") {
    TEST_CASE("entries parse into host, wildcard and port; to_string gives them back") {
        for (const char* entry : {"api.example.org:443", "*.example.net:80", "127.0.0.1:8080",
                                  "[::1]:8080", "localhost:1"})
            CHECK(parse_allow_rule(entry).to_string() == entry);
        auto rule = parse_allow_rule("*.Example.NET.:80");
        CHECK(rule.wildcard);
        CHECK(rule.host == "example.net");
        CHECK(parse_allow_rule("[0:0::1]:8080").host == "::1");  // canonical form
    }

    TEST_CASE("malformed entries say what is wrong") {
        CHECK(contains(rule_error("example.org"), "expected HOST:PORT"));
        CHECK(contains(rule_error("example.org:"), "port \"\" is not a number"));
        CHECK(contains(rule_error("example.org:http"), "is not a number"));
        CHECK(contains(rule_error("example.org:0"), "outside 1-65535"));
        CHECK(contains(rule_error("example.org:65536"), "outside 1-65535"));
        CHECK(contains(rule_error("example.org:443x"), "is not a number"));
        CHECK(contains(rule_error("::1:8080"), "needs brackets"));
        CHECK(contains(rule_error("[::1]8080"), "expected [IPV6]:PORT"));
        CHECK(contains(rule_error("[example.org]:80"), "is not an IPv6 address"));
        CHECK(contains(rule_error("exa mple.org:80"), "is not a host name"));
        CHECK(contains(rule_error("-bad.org:80"), "is not a host name"));
        CHECK(contains(rule_error("a..b:80"), "is not a host name"));
        CHECK(contains(rule_error(":80"), "is not a host name"));
        CHECK(contains(rule_error("127.1:80"), "is not a host name"));  // inet_aton spelling
        CHECK(contains(rule_error("api.*.org:443"), "only allowed as a whole first label"));
        CHECK(contains(rule_error("*example.org:443"), "only allowed as a whole first label"));
        CHECK(contains(rule_error("*.127.0.0.1:80"), "a wildcard needs a domain name"));
        CHECK(contains(rule_error("*:443"), "only allowed as a whole first label"));
        CHECK(contains(rule_error("example.org:80:80"), "needs brackets"));
    }

    TEST_CASE("a wildcard matches subdomains at any depth, never the domain or a lookalike") {
        check_matches({"*.example.net:80"}, {{"a.example.net:80", true},
                                             {"a.b.example.net:80", true},
                                             {"A.Example.Net.:80", true},
                                             {"example.net:80", false},
                                             {"evilexample.net:80", false},
                                             {"example.net.evil.org:80", false},
                                             {"a.example.net:443", false}});
    }

    TEST_CASE("exact names and ports; names are not addresses and addresses not names") {
        check_matches({"api.example.org:443", "localhost:8080", "127.0.0.1:9000", "[::1]:9001"},
                      {{"api.example.org:443", true},
                       {"API.example.org:443", true},
                       {"api.example.org:444", false},
                       {"x.api.example.org:443", false},
                       {"localhost:8080", true},
                       {"127.0.0.1:8080", false},
                       {"127.0.0.1:9000", true},
                       {"localhost:9000", false},
                       {"[0::1]:9001", true},
                       {"127.0.0.1:9001", false}});
    }

    TEST_CASE("an empty allowlist allows nothing and says so") {
        Allowlist none;
        CHECK_FALSE(none.allows(parse_destination("localhost:80")));
        CHECK(none.describe() == "(none)");
        CHECK(Allowlist::parse({"a.org:1", "*.b.org:2"}).describe() == "a.org:1, *.b.org:2");
    }

    TEST_CASE("Allowlist::parse names the bad entry") {
        CHECK(message_of<std::invalid_argument>([] {
                  Allowlist::parse({"ok.org:1", "bad"});
              }).starts_with("\"bad\": expected HOST:PORT"));
    }

    TEST_CASE("destinations print as the keys of blocked_connections") {
        CHECK(parse_destination("Evil.Example:80").to_string() == "evil.example:80");
        CHECK(parse_destination("[::1]:80").to_string() == "[::1]:80");
        CHECK(parse_destination("10.0.0.1:80").is_ip_literal);
    }
}

TEST_SUITE("proxy upstream addresses") {
    TEST_CASE("the host, local networks and metadata services are off limits to names") {
        for (const char* address : {"127.0.0.1",
                                    "127.9.9.9",
                                    "0.0.0.0",
                                    "169.254.169.254",
                                    "10.0.0.1",
                                    "10.255.1.1",
                                    "172.16.0.1",
                                    "172.31.255.255",
                                    "192.168.1.1",
                                    "100.64.0.1",
                                    "100.100.100.200",
                                    "224.0.0.1",
                                    "255.255.255.255",
                                    "::1",
                                    "::",
                                    "fe80::1",
                                    "fc00::1",
                                    "fd00:ec2::254",
                                    "ff02::1",
                                    "fec0::1",
                                    "::ffff:127.0.0.1",
                                    "::ffff:169.254.1.1",
                                    "::ffff:10.1.2.3",
                                    "::10.1.2.3",
                                    "64:ff9b::10.1.2.3",
                                    "64:ff9b::169.254.169.254",
                                    "64:ff9b:1::1",
                                    "2002:0a01:0203::1",
                                    "2002:c0a8:0101::",
                                    "2001:0:4136:e378:8000:63bf:3fff:fdd2"})
            CHECK_MESSAGE(is_local(address), address);
        for (const char* address : {"93.184.216.34", "128.0.0.1", "172.32.0.1", "100.128.0.1",
                                    "192.169.0.1", "2001:db8::1", "2606:4700::1111",
                                    "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:0808:0808::1"})
            CHECK_MESSAGE(!is_local(address), address);
    }

    TEST_CASE("every address of the host's own interfaces is off limits, in any form") {
        auto address = [](const char* text) {
            sockaddr_storage storage{};
            if (std::string_view(text).find(':') != std::string_view::npos) {
                auto& v6 = reinterpret_cast<sockaddr_in6&>(storage);
                v6.sin6_family = AF_INET6;
                REQUIRE(::inet_pton(AF_INET6, text, &v6.sin6_addr) == 1);
            } else {
                auto& v4 = reinterpret_cast<sockaddr_in&>(storage);
                v4.sin_family = AF_INET;
                REQUIRE(::inet_pton(AF_INET, text, &v4.sin_addr) == 1);
            }
            return storage;
        };
        const std::vector<sockaddr_storage> own{address("198.51.100.7"), address("2001:db8::7")};
        auto forbidden = [&](const char* text) {
            const sockaddr_storage a = address(text);
            return pysandbox::proxy::forbidden_reason(reinterpret_cast<const sockaddr&>(a), own);
        };
        CHECK(forbidden("198.51.100.7") == "an address of this host");
        CHECK(forbidden("::ffff:198.51.100.7") == "an address of this host");
        CHECK(forbidden("64:ff9b::198.51.100.7") == "an address of this host");
        CHECK(forbidden("2001:db8::7") == "an address of this host");
        CHECK(forbidden("198.51.100.8").empty());
        CHECK(forbidden("2001:db8::8").empty());
    }

    TEST_CASE("localhost and names under it may reach the host; nothing else by name") {
        CHECK(parse_destination("localhost:80").is_localhost());
        CHECK(parse_destination("api.localhost:80").is_localhost());
        CHECK_FALSE(parse_destination("evillocalhost:80").is_localhost());
        CHECK_FALSE(parse_destination("localhost.evil.org:80").is_localhost());
        CHECK_FALSE(parse_destination("127.0.0.1:80").is_localhost());
    }
}

TEST_SUITE("proxy requests") {
    TEST_CASE("a request head: request line and headers, white space trimmed") {
        auto request = parse_request_head(
            "CONNECT api.example.org:443 HTTP/1.1\r\nHost: api.example.org:443\r\n"
            "User-Agent:  x \r\n\r\n");
        REQUIRE(request.has_value());
        CHECK(request->method == "CONNECT");
        CHECK(request->target == "api.example.org:443");
        CHECK(request->version == "HTTP/1.1");
        REQUIRE(request->headers.size() == 2);
        CHECK(request->headers[1].name == "User-Agent");
        CHECK(request->headers[1].value == "x");
        CHECK(parse_request_head("GET http://a/ HTTP/1.0\r\n\r\n").has_value());
    }

    TEST_CASE("malformed heads are refused") {
        for (const char* head : {"GET http://a/ HTTP/1.1\r\n",  // incomplete
                                 "GET http://a/\r\n\r\n", "GET  http://a/ HTTP/1.1\r\n\r\n",
                                 "GET http://a/ HTTP/2\r\n\r\n", "G(T http://a/ HTTP/1.1\r\n\r\n",
                                 "GET http://a/ HTTP/1.1\r\nno colon\r\n\r\n",
                                 "GET http://a/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
                                 "GET http://a/ HTTP/1.1\r\nBad Name: b\r\n\r\n"})
            CHECK_MESSAGE(!parse_request_head(head).has_value(), head);
    }

    TEST_CASE("CONNECT tunnels to its authority") {
        auto plan = std::get<ForwardPlan>(plan_for("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"));
        CHECK(plan.tunnel);
        CHECK(plan.destination.to_string() == "[::1]:8443");
        auto refusal = std::get<Refusal>(plan_for("CONNECT example.org HTTP/1.1\r\n\r\n"));
        CHECK(refusal.status == 400);
    }

    TEST_CASE("an absolute http URI becomes an origin-form request without proxy headers") {
        auto plan = std::get<ForwardPlan>(plan_for(
            "POST http://Example.org:8080/a/b?q=1#frag HTTP/1.1\r\nHost: example.org:8080\r\n"
            "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
            "Proxy-Authorization: secret\r\nContent-Length: 3\r\n\r\n"));
        CHECK_FALSE(plan.tunnel);
        CHECK(plan.destination.to_string() == "example.org:8080");
        CHECK(plan.upstream_head ==
              "POST /a/b?q=1 HTTP/1.1\r\nHost: example.org:8080\r\nContent-Length: 3\r\n"
              "Connection: close\r\n\r\n");
    }

    TEST_CASE("the script's Host is replaced by the allowed authority") {
        auto plan = std::get<ForwardPlan>(
            plan_for("GET http://a.org/x HTTP/1.1\r\nHost: evil.example\r\nhost: other\r\n\r\n"));
        CHECK(plan.upstream_head == "GET /x HTTP/1.1\r\nHost: a.org\r\nConnection: close\r\n\r\n");
    }

    TEST_CASE("header lines end in CRLF only: a bare CR or LF or a NUL refuses the head") {
        for (const char* head : {"GET http://a.org/ HTTP/1.1\r\nHost: a.org\nX-Evil: 1\r\n\r\n",
                                 "GET http://a.org/ HTTP/1.1\nHost: a.org\r\n\r\n",
                                 "GET http://a.org/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n",
                                 "GET http://a.org/ HTTP/1.1\r\nX: a\r\n\n\r\n\r\n"}) {
            CAPTURE(head);
            CHECK_FALSE(parse_request_head(head).has_value());
        }
        CHECK_FALSE(
            parse_request_head(std::string("GET http://a.org/ HTTP/1.1\r\nX: \0\r\n\r\n", 32))
                .has_value());
    }

    TEST_CASE("a plain request's body is Content-Length bytes; chunked bodies are refused") {
        auto plain = std::get<ForwardPlan>(
            plan_for("POST http://a.org/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n"));
        CHECK(plain.body_length == 12);
        CHECK(std::get<ForwardPlan>(plan_for("GET http://a.org/ HTTP/1.1\r\n\r\n")).body_length ==
              0);
        auto chunked = std::get<Refusal>(
            plan_for("POST http://a.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
        CHECK(chunked.status == 501);
        for (const char* bad : {"Content-Length: 1, 2\r\n", "Content-Length: -1\r\n",
                                "Content-Length: 1\r\nContent-Length: 2\r\n"}) {
            CAPTURE(bad);
            auto refusal = std::get<Refusal>(
                plan_for(std::string("POST http://a.org/ HTTP/1.1\r\n") + bad + "\r\n"));
            CHECK(refusal.status == 400);
        }
    }

    TEST_CASE("the port defaults to 80, the path to /, a missing Host is added") {
        auto plan = std::get<ForwardPlan>(plan_for("GET http://[::1] HTTP/1.0\r\n\r\n"));
        CHECK(plan.destination.to_string() == "[::1]:80");
        CHECK(plan.upstream_head == "GET / HTTP/1.0\r\nHost: [::1]\r\nConnection: close\r\n\r\n");
        auto query = std::get<ForwardPlan>(plan_for("GET http://a.org?x HTTP/1.1\r\n\r\n"));
        CHECK(query.upstream_head.starts_with("GET /?x HTTP/1.1\r\n"));
    }

    TEST_CASE("what the proxy does not serve is a 400 saying why") {
        auto reason = [](const char* head) { return std::get<Refusal>(plan_for(head)).reason; };
        CHECK(contains(reason("GET https://a.org/ HTTP/1.1\r\n\r\n"), "CONNECT"));
        CHECK(contains(reason("GET /index.html HTTP/1.1\r\n\r\n"), "not a proxy request"));
        CHECK(contains(reason("GET ftp://a.org/ HTTP/1.1\r\n\r\n"), "not a proxy request"));
        CHECK(contains(reason("GET http://user@a.org/ HTTP/1.1\r\n\r\n"), "user information"));
        CHECK(contains(reason("GET http://a.org:x/ HTTP/1.1\r\n\r\n"), "not a number"));
    }

    TEST_CASE("the 403 names the destination, the policy and what is allowed") {
        auto response = pysandbox::proxy::denial_response(parse_destination("evil.org:80"),
                                                          Allowlist::parse({"good.org:443"}));
        CHECK(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        CHECK(contains(response, "Connection: close\r\n"));
        CHECK(contains(response, "sandbox policy blocked the connection to evil.org:80"));
        CHECK(contains(response, "Allowed destinations: good.org:443\n"));
        auto body = response.substr(response.find("\r\n\r\n") + 4);
        CHECK(contains(response, "Content-Length: " + std::to_string(body.size()) + "\r\n"));
    }
}
