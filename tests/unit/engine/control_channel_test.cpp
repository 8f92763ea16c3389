// The session's control channel without a sandbox: the driver's channel (framing, and what it
// does with records the script forges).

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "engine/control_channel.hpp"

using namespace pysandbox;
using json = nlohmann::json;

namespace {

// A record as the driver writes it: flag, eight hex digits, text.
std::string record(char flag, unsigned index, const std::string& text) {
    char header[16];
    std::snprintf(header, sizeof header, "%c%08x", flag, index);
    return header + text;
}

void send_from_driver(const ControlChannel& channel, const std::string& bytes) {
    REQUIRE(::send(channel.child_fd(), bytes.data(), bytes.size(), 0) ==
            static_cast<ssize_t>(bytes.size()));
}

std::vector<json> receive_all(ControlChannel& channel) {
    channel.on_readable();
    std::vector<json> messages;
    while (auto message = channel.receive()) messages.push_back(*message);
    return messages;
}

}  // namespace

TEST_SUITE("control channel") {
    TEST_CASE("a message in one record, and one over several") {
        ControlChannel channel;
        send_from_driver(channel, record('.', 0, R"({"kind":"ready"})"));
        send_from_driver(channel, record('+', 0, R"({"kind":"done",)"));
        send_from_driver(channel, record('.', 1, R"("token":"t"})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 2);
        CHECK(messages[0]["kind"] == "ready");
        CHECK(messages[1]["token"] == "t");
        CHECK(channel.dropped() == 0);
    }

    TEST_CASE("a record sent again after an interrupt is taken once") {
        ControlChannel channel;
        send_from_driver(channel, record('+', 0, R"({"a":)"));
        send_from_driver(channel, record('+', 0, R"({"a":)"));  // the retry of record 0
        send_from_driver(channel, record('.', 1, "1}"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["a"] == 1);
    }

    TEST_CASE("forged and broken records lose only their own message") {
        ControlChannel channel;
        send_from_driver(channel, "garbage");                             // no header
        send_from_driver(channel, record('+', 0, R"({"lost":)"));         // then out of order:
        send_from_driver(channel, record('.', 5, "true}"));               // lost
        send_from_driver(channel, record('.', 0, "[1, 2]"));              // not an object
        send_from_driver(channel, record('.', 0, "{not json"));           // not JSON
        send_from_driver(channel, record('+', 0, R"({"half":)"));         // replaced by
        send_from_driver(channel, record('.', 0, R"({"kind":"next"})"));  // a new message
        send_from_driver(channel, std::string());                         // 0 bytes: not EOF
        send_from_driver(channel, record('.', 0, R"({"kind":"last"})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 2);
        CHECK(messages[0]["kind"] == "next");
        CHECK(messages[1]["kind"] == "last");
        CHECK(channel.dropped() >= 5);
        CHECK_FALSE(channel.closed());
    }

    TEST_CASE("a message over the cap is dropped whole") {
        ControlChannel channel;
        const std::string chunk(kControlRecord - 9, 'x');
        std::size_t sent = 0;
        unsigned index = 0;
        send_from_driver(channel, record('+', index++, "{\"big\":\""));
        // Drained as it goes: the socket holds only a few records.
        while (sent <= kMaxControlMessage) {
            send_from_driver(channel, record('+', index++, chunk));
            sent += chunk.size();
            if (index % 2 == 0) channel.on_readable();
        }
        send_from_driver(channel, record('.', index, "\"}"));
        send_from_driver(channel, record('.', 0, R"({"kind":"after"})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["kind"] == "after");
        CHECK(channel.dropped() >= 1);
    }

    TEST_CASE("a message shaped unlike the driver's is dropped before it is parsed") {
        // Millions of tiny values, or millions deep, would parse into many times their size here,
        // outside the sandbox's limits: past the bounds nothing is built.
        ControlChannel channel;
        std::string many = R"({"kind":"done","many":[)";
        for (std::size_t i = 0; i < kMaxControlValues; ++i) many += "[],";
        send_from_driver(channel, record('.', 0, many + "[]]}"));
        const std::string deep =
            std::string(kMaxControlDepth, '[') + std::string(kMaxControlDepth, ']');
        send_from_driver(channel, record('.', 0, R"({"kind":"done","deep":)" + deep + "}"));
        // As deep and as many as the driver's own messages get, and more, is taken.
        std::string figures = R"({"kind":"done","token":"t","figures":[)";
        for (int i = 0; i < 32; ++i) figures += R"("iVBORw0KGgo=",)";
        std::string failed = R"("failed":{)";
        for (int i = 0; i < 200; ++i) failed += "\"m" + std::to_string(i) + "\":\"ImportError\",";
        send_from_driver(channel, record('.', 0, figures + R"("x"],)" + failed + R"("z":"e"}})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["figures"].size() == 33);
        CHECK(messages[0]["failed"].size() == 201);
        CHECK(channel.dropped() == 2);
    }

    TEST_CASE("descriptors sent along are not installed") {
        ControlChannel channel;
        int pipe_fds[2];
        REQUIRE(::pipe(pipe_fds) == 0);
        const std::string text = record('.', 0, R"({"kind":"x"})");
        iovec part{const_cast<char*>(text.data()), text.size()};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr message{};
        message.msg_iov = &part;
        message.msg_iovlen = 1;
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cmsg), &pipe_fds[1], sizeof(int));
        REQUIRE(::sendmsg(channel.child_fd(), &message, 0) > 0);
        ::close(pipe_fds[1]);
        const auto messages = receive_all(channel);
        CHECK(messages.size() == 1);
        // Had the write end been installed in this process, the pipe would not read EOF.
        char byte;
        CHECK(::read(pipe_fds[0], &byte, 1) == 0);
        ::close(pipe_fds[0]);
    }

    TEST_CASE("the driver's end closing is the end of the channel") {
        ControlChannel channel;
        channel.close_child_end();
        channel.on_readable();
        CHECK(channel.closed());
    }

    TEST_CASE("what the supervisor sends arrives as numbered records") {
        ControlChannel channel;
        const std::string code(200 * 1024, 'a');
        channel.send({{"kind", "cell"}, {"code", code}});
        std::string text;
        unsigned expected = 0;
        for (;;) {
            channel.on_writable();
            char buffer[kControlRecord + 1];
            const ssize_t n = ::recv(channel.child_fd(), buffer, sizeof buffer, MSG_DONTWAIT);
            REQUIRE(n > 9);
            REQUIRE(static_cast<std::size_t>(n) <= kControlRecord);
            CHECK(std::string(buffer + 1, 8) == [&] {
                char hex[9];
                std::snprintf(hex, sizeof hex, "%08x", expected);
                return std::string(hex);
            }());
            ++expected;
            text.append(buffer + 9, static_cast<std::size_t>(n) - 9);
            if (buffer[0] == '.') break;
            REQUIRE(buffer[0] == '+');
        }
        CHECK(expected == 4);
        CHECK(json::parse(text)["code"] == code);
    }

    TEST_CASE("a message is cut into as few records as its text needs, written in pieces") {
        // {"code":"…","kind":"cell"}: 25 bytes and the code.
        constexpr std::size_t kPayload = kControlRecord - kControlHeader;
        for (const std::size_t size :
             {std::size_t{1}, kPayload - 25, kPayload - 24, 2 * kPayload - 25, 3 * kPayload}) {
            CAPTURE(size);
            ControlChannel channel;
            const std::string code(size, 'c');
            const json message = {{"kind", "cell"}, {"code", code}};
            channel.send(message);
            std::string text;
            std::size_t records = 0;
            char buffer[kControlRecord + 1];
            for (bool last = false; !last; ++records) {
                channel.on_writable();
                const ssize_t n = ::recv(channel.child_fd(), buffer, sizeof buffer, MSG_DONTWAIT);
                REQUIRE(n > static_cast<ssize_t>(kControlHeader));
                last = buffer[0] == '.';
                text.append(buffer + kControlHeader, static_cast<std::size_t>(n) - kControlHeader);
            }
            CHECK(text == message.dump());
            CHECK(records == (text.size() + kPayload - 1) / kPayload);
        }
    }
}
