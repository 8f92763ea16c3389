// Landlock's rules as the plan decides them (plan/landlock_rules.hpp): which rights each ABI
// handles, TCP by network mode, no device ioctls granted anywhere, and the names the result
// lists.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/landlock_rules.hpp"

using namespace pysandbox;
using namespace pysandbox::landlock;

namespace {

Ruleset rules(int abi, NetMode net = NetMode::none) {
    return plan_rules(abi, net, {"/usr"}, {"/tmp"});
}

}  // namespace

TEST_SUITE("landlock rules") {
    TEST_CASE("no Landlock: nothing handled, nothing listed") {
        const Ruleset none = rules(0);
        CHECK(none.handled == 0);
        CHECK(none.handled_net == 0);
        CHECK(none.scoped == 0);
        CHECK(none.rules.empty());
        CHECK(handled_rights(none).empty());
    }

    TEST_CASE("each ABI adds what it brought, and no more") {
        CHECK(handled_rights(rules(1)) == std::vector<std::string>{"fs"});
        CHECK((rules(3).handled & kAccessFsTruncate) != 0);
        CHECK((rules(3).handled & kAccessFsIoctlDev) == 0);
        CHECK(rules(3).handled_net == 0);
        CHECK(handled_rights(rules(4)) == std::vector<std::string>{"fs", "tcp"});
        CHECK(handled_rights(rules(5)) == std::vector<std::string>{"fs", "ioctl_dev", "tcp"});
        CHECK(rules(5).scoped == 0);
        CHECK(handled_rights(rules(6)) ==
              std::vector<std::string>{"fs", "ioctl_dev", "tcp", "scopes"});
        CHECK(rules(7).scoped == (kScopeAbstractUnixSocket | kScopeSignal));
    }

    TEST_CASE("TCP: nothing under none, the proxy's port under proxy, unhandled under loopback") {
        const Ruleset none = rules(7, NetMode::none);
        CHECK(none.handled_net == (kAccessNetBindTcp | kAccessNetConnectTcp));
        CHECK(none.connect_ports.empty());
        const Ruleset proxy = rules(7, NetMode::proxy);
        CHECK(proxy.handled_net == (kAccessNetBindTcp | kAccessNetConnectTcp));
        CHECK(proxy.connect_ports == std::vector<std::uint16_t>{3128});
        const Ruleset loopback = rules(7, NetMode::loopback);
        CHECK(loopback.handled_net == 0);
        CHECK(loopback.connect_ports.empty());
        CHECK(handled_rights(loopback) == std::vector<std::string>{"fs", "ioctl_dev", "scopes"});
    }

    TEST_CASE("no rule grants device ioctls") {
        const Ruleset ruleset = rules(7);
        REQUIRE((ruleset.handled & kAccessFsIoctlDev) != 0);
        for (const Rule& rule : ruleset.rules) {
            CAPTURE(rule.path);
            CHECK((rule.access & kAccessFsIoctlDev) == 0);
        }
    }
}
