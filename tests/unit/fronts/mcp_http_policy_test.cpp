#include "fronts/mcp_http_policy.hpp"

#include <doctest/doctest.h>

namespace pysandbox::mcp {

TEST_CASE("mcp --http: [ADDR:]PORT, loopback unless an address is given") {
    const auto port_only = parse_listen_address("8080");
    REQUIRE(port_only);
    CHECK(port_only->host == "127.0.0.1");
    CHECK(port_only->port == 8080);
    const auto any = parse_listen_address("0.0.0.0:0");
    REQUIRE(any);
    CHECK(any->host == "0.0.0.0");
    CHECK(any->port == 0);
    const auto six = parse_listen_address("[::1]:9");
    REQUIRE(six);
    CHECK(six->host == "::1");
    for (const char* bad : {"", "x", "70000", "-1", "1.2.3:80", "::1:80", "host.example:80",
                            "127.0.0.1:", "127.0.0.1:8o"})
        CHECK_MESSAGE(!parse_listen_address(bad), bad);
}

TEST_CASE("mcp --http: what is loopback") {
    CHECK(is_loopback("127.0.0.1"));
    CHECK(is_loopback("127.3.2.1"));
    CHECK(is_loopback("::1"));
    CHECK(is_loopback("localhost"));
    CHECK_FALSE(is_loopback("0.0.0.0"));
    CHECK_FALSE(is_loopback("::"));
    CHECK_FALSE(is_loopback("10.0.0.1"));
}

TEST_CASE("mcp --http: an Origin comes in from this host's loopback at the server's port") {
    CHECK(origin_allowed("http://127.0.0.1:8080", 8080, {}));
    CHECK(origin_allowed("http://localhost:8080", 8080, {}));
    CHECK(origin_allowed("http://[::1]:8080", 8080, {}));
    CHECK_FALSE(origin_allowed("http://127.0.0.1:8081", 8080, {}));
    CHECK_FALSE(origin_allowed("http://evil.example", 8080, {}));
    CHECK_FALSE(origin_allowed("http://localhost:8080.evil.example", 8080, {}));
    CHECK_FALSE(origin_allowed("null", 8080, {}));
    CHECK(origin_allowed("https://app.example", 8080, {"https://app.example"}));
    CHECK_FALSE(origin_allowed("https://app.example.evil", 8080, {"https://app.example"}));
}

TEST_CASE("mcp --http: the bearer token") {
    CHECK(bearer_matches("Bearer s3cret", "s3cret"));
    CHECK_FALSE(bearer_matches("Bearer s3cre", "s3cret"));
    CHECK_FALSE(bearer_matches("Bearer s3cretX", "s3cret"));
    CHECK_FALSE(bearer_matches("Bearer S3cret", "s3cret"));
    CHECK_FALSE(bearer_matches("Basic s3cret", "s3cret"));
    CHECK_FALSE(bearer_matches("", "s3cret"));
    CHECK_FALSE(bearer_matches("Bearer ", ""));  // no token configured: nothing matches
}

}  // namespace pysandbox::mcp
