// The session's control channel without a sandbox: the driver's channel (framing, and what it
// does with records the script forges).

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
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

// Never blocks: a socket the channel stopped draining (a muted one) fails the test, not hangs it.
void send_from_driver(const ControlChannel& channel, const std::string& bytes) {
    REQUIRE(::send(channel.child_fd(), bytes.data(), bytes.size(), MSG_DONTWAIT) ==
            static_cast<ssize_t>(bytes.size()));
}

std::vector<json> receive_all(ControlChannel& channel) {
    channel.on_readable();
    std::vector<json> messages;
    while (auto message = channel.receive()) messages.push_back(message->body);
    return messages;
}

// A message's text in records as the driver sends them; `each` after each one (the poll loop).
template <typename Each>
void send_text(const ControlChannel& channel, const std::string& text, Each each) {
    const std::size_t payload = kControlRecord - kControlHeader;
    for (unsigned index = 0; index * payload < text.size(); ++index) {
        const bool last = (index + 1) * payload >= text.size();
        send_from_driver(channel,
                         record(last ? '.' : '+', index, text.substr(index * payload, payload)));
        each();
    }
}

std::chrono::nanoseconds thread_cpu() {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return std::chrono::seconds{now.tv_sec} + std::chrono::nanoseconds{now.tv_nsec};
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

    TEST_CASE("a message sent goes out at write_now, without a round of the loop") {
        ControlChannel channel;
        channel.send({{"kind", "cell"}, {"code", "print(1)"}});
        CHECK(channel.wants_write());
        channel.write_now();
        CHECK_FALSE(channel.wants_write());
        char got[256];
        const ssize_t n = ::recv(channel.child_fd(), got, sizeof got, MSG_DONTWAIT);
        REQUIRE(n > 9);
        CHECK(std::string(got, 9) == ".00000000");
        CHECK(json::parse(std::string(got + 9, static_cast<std::size_t>(n) - 9))["code"] ==
              "print(1)");
        channel.write_now();  // nothing left: nothing more is sent
        CHECK(::recv(channel.child_fd(), got, sizeof got, MSG_DONTWAIT) < 0);
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
        // The cap, not the budget: reading 32 MiB may cost more than 250 ms on a busy host.
        ControlChannel channel(ControlBudget{.cpu = std::chrono::hours{1}});
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

    TEST_CASE("a message the reader does not wait for is skipped from its first record") {
        ControlChannel channel;
        channel.expect("done", "t1");
        send_from_driver(channel, record('.', 0, R"({"kind":"ready"})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t0"})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t1x"})"));
        send_from_driver(channel, record('.', 0, R"({"token":"t1","kind":"done"})"));
        send_from_driver(channel, record('+', 0, R"({"kind":"done","token":"t2",)"));
        send_from_driver(channel, record('.', 1, R"("outcome":"ok"})"));  // the rest of it
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t1","outcome":"ok"})"));
        auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["token"] == "t1");
        CHECK(channel.dropped() == 0);  // skipped, not malformed
        channel.expect_nothing();
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t1"})"));
        CHECK(receive_all(channel).empty());
        channel.expect("ready");
        send_from_driver(channel, record('.', 0, R"({"kind":"ready","failed":{}})"));
        messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["kind"] == "ready");
    }

    TEST_CASE("a reader may wait for either of two kinds with one token") {
        ControlChannel channel;
        channel.expect({"done", "input"}, "t1");
        send_from_driver(channel, record('.', 0, R"({"kind":"input","token":"t0","n":1})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"inputs","token":"t1"})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"ready"})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"input","token":"t1","n":2})"));
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t1"})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 2);
        CHECK(messages[0]["n"] == 2);
        CHECK(messages[1]["kind"] == "done");
        CHECK(channel.dropped() == 0);
    }

    TEST_CASE("skipping a flood costs next to nothing, parsing it would not") {
        // The same 8 MiB message, once with a token the reader does not wait for and once with
        // the one it does but broken past its one long string: only the second is parsed (and
        // dropped).
        const std::size_t size = 8 * 1024 * 1024;
        ControlChannel skipped;
        skipped.expect("done", "t1");
        ControlChannel parsed;
        parsed.expect("done", "t1");
        std::chrono::nanoseconds skipping{}, parsing{};
        for (auto [channel, token, spent] :
             {std::tuple{&skipped, "t0", &skipping}, std::tuple{&parsed, "t1", &parsing}}) {
            const std::string head =
                std::string(R"({"kind":"done","token":")") + token + R"(","x":")";
            const std::string text = head + std::string(size - head.size(), 'x') + R"(" x})";
            send_text(*channel, text, [&] {
                const std::chrono::nanoseconds start = thread_cpu();
                channel->on_readable();
                *spent += thread_cpu() - start;
            });
            CHECK_FALSE(channel->receive().has_value());
        }
        CHECK(skipped.dropped() == 0);
        CHECK(parsed.dropped() == 1);
        CHECK(skipping * 4 < parsing);
    }

    TEST_CASE("past its byte budget the channel is muted until the next expect") {
        ControlChannel channel(
            ControlBudget{.bytes = 1024 * 1024, .cpu = std::chrono::seconds{10}});
        channel.expect("done", "t1");
        // Drained as it goes, as the poll loop would: 2 MiB the reader does not want.
        const std::size_t payload = kControlRecord - kControlHeader;
        for (unsigned index = 0; index < 32 && !channel.muted(); ++index) {
            send_from_driver(channel, record('+', index, std::string(payload, 'x')));
            channel.on_readable();
        }
        CHECK(channel.muted());
        CHECK(channel.mutes() == 1);
        CHECK_FALSE(channel.wants_read());
        // Its answer, sent now, waits unread; the next cell's expect hears the channel again.
        send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t1"})"));
        CHECK_FALSE(channel.receive().has_value());
        channel.expect("done", "t1");
        CHECK_FALSE(channel.muted());
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["kind"] == "done");
        CHECK(channel.mutes() == 1);
    }

    TEST_CASE("past its CPU budget the channel is muted; the message it takes is not charged") {
        ControlChannel channel(
            ControlBudget{.bytes = 1024 * kMaxControlMessage, .cpu = std::chrono::milliseconds{5}});
        channel.expect("done", "t1");
        // 1 MiB, drained as it goes: taken, however long it took to parse, and no mute.
        const std::string big =
            R"({"kind":"done","token":"t1","value":")" + std::string(1024 * 1024, 'v') + R"("})";
        send_text(channel, big, [&] { channel.on_readable(); });
        std::vector<json> messages;
        while (auto message = channel.receive()) messages.push_back(message->body);
        REQUIRE(messages.size() == 1);
        CHECK_FALSE(channel.muted());
        // The same again, broken past its string: parsed in vain, and charged.
        send_text(channel, big.substr(0, big.size() - 1) + " x}", [&] { channel.on_readable(); });
        CHECK_FALSE(channel.receive().has_value());
        CHECK(channel.dropped() == 1);
        CHECK(channel.muted());
        CHECK(channel.mutes() == 1);
    }

    TEST_CASE("a message carries when the driver sent it, by the kernel's clock") {
        ControlChannel channel;
        const auto before = std::chrono::system_clock::now();
        send_from_driver(channel, record('.', 0, R"({"kind":"ready"})"));
        const auto after = std::chrono::system_clock::now();
        channel.on_readable();
        const auto message = channel.receive();
        REQUIRE(message);
        REQUIRE(message->sent);
        CHECK(*message->sent >= before - std::chrono::milliseconds{1});
        CHECK(*message->sent <= after + std::chrono::milliseconds{1});
    }

    TEST_CASE("descriptors sent along with a timestamp asked for are not installed either") {
        // Room in the control buffer for the timestamp must not become room for descriptors.
        ControlChannel channel;
        int pipe_fds[2];
        REQUIRE(::pipe(pipe_fds) == 0);
        const std::string text = record('.', 0, R"({"kind":"x"})");
        iovec part{const_cast<char*>(text.data()), text.size()};
        int fds[4] = {pipe_fds[1], pipe_fds[1], pipe_fds[1], pipe_fds[1]};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
        msghdr message{};
        message.msg_iov = &part;
        message.msg_iovlen = 1;
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof fds);
        std::memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
        REQUIRE(::sendmsg(channel.child_fd(), &message, 0) > 0);
        ::close(pipe_fds[1]);
        CHECK(receive_all(channel).size() == 1);
        char byte;
        CHECK(::read(pipe_fds[0], &byte, 1) == 0);
        ::close(pipe_fds[0]);
    }

    TEST_CASE("what the driver could not have written is dropped before the parser") {
        // Its messages are ASCII with every control character escaped; a string left open, a
        // bad escape or another byte would cost the parser's error path a copy of the string.
        ControlChannel channel;
        channel.expect("done", "t");
        for (const std::string tail : {R"("x":"open)", "\"x\":\"\x01\"}", R"("x":"\q"})",
                                       R"("x":"\u12"})", "\"x\":\"\xc3\xa9\"}"})
            send_from_driver(channel, record('.', 0, R"({"kind":"done","token":"t",)" + tail));
        send_from_driver(channel,
                         record('.', 0, R"({"kind":"done","token":"t","x":"\u00e9\"\\\/"})"));
        const auto messages = receive_all(channel);
        REQUIRE(messages.size() == 1);
        CHECK(messages[0]["x"] == "\u00e9\"\\/");
        CHECK(channel.dropped() == 5);
    }
}
