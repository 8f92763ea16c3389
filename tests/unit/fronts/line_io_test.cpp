// The fronts' line reader (fronts/line_io.hpp): lines as they were written, short ones copied out
// of its buffer and long ones moved out with it, a line over the cap given as too_long.

#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fronts/line_io.hpp"

using pysandbox::LineReader;

TEST_SUITE("line reader") {
    TEST_CASE("short and long lines, one over the cap, and the last without its newline") {
        const std::string long_line(3 << 20, 'a');  // moved out, not copied
        const std::string over(5 << 20, 'b');
        const std::string input =
            "one\n" + long_line + "\ntwo\n" + over + "\n" + long_line + "\nthree";
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        std::thread writer([&] {
            for (std::size_t at = 0; at < input.size();) {
                const ssize_t n = ::write(fds[1], input.data() + at, input.size() - at);
                if (n <= 0) break;  // the reader's end is gone: its checks will say so
                at += static_cast<std::size_t>(n);
            }
            ::close(fds[1]);
        });
        LineReader reader(fds[0], 4 << 20);
        std::vector<LineReader::Line> lines;
        while (!reader.exhausted()) {
            if (reader.wants_read()) reader.on_readable();
            while (auto line = reader.next()) lines.push_back(std::move(*line));
        }
        writer.join();
        ::close(fds[0]);
        REQUIRE(lines.size() == 6);
        CHECK(lines[0].text == "one");
        CHECK(lines[1].text == long_line);
        CHECK(lines[2].text == "two");
        CHECK(lines[3].too_long);
        CHECK(lines[3].text.empty());
        CHECK(lines[4].text == long_line);
        CHECK(lines[5].text == "three");
        for (int i : {0, 1, 2, 4, 5}) CHECK_FALSE(lines[i].too_long);
    }
}
