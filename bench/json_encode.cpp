// How fast a result's output is made JSON: is_text (text or base64?) and the line's escaping, on
// 100 MiB of output of three kinds, next to nlohmann's own dump of the same object. Medians of
// --rounds runs; MB/s of the output's bytes.
//
//     build/bench/json_encode [--rounds 7] [--mib 100]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "report/encoding.hpp"
#include "report/json_text.hpp"

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// What scripts print: the flood (one byte over and over), log lines (ASCII with newlines, quotes
// and tabs), and non-English text (two- and three-byte characters among ASCII).
std::string sample(const std::string& kind, std::size_t size) {
    std::string unit;
    if (kind == "flood") unit = "x";
    if (kind == "log")
        unit = "2026-12-03 14:29:23 INFO step=\"train\"\tloss=0.4213 accuracy=0.871 lr=3e-4\n";
    if (kind == "utf-8") unit = "Größe der Menge: 12 €, naïve café — 東京 は 晴れ\n";
    std::string text;
    text.reserve(size + unit.size());
    while (text.size() < size) text += unit;
    text.resize(size);
    while ((static_cast<unsigned char>(text.back()) & 0xc0) == 0x80 ||
           static_cast<unsigned char>(text.back()) >= 0xc0)
        text.pop_back();  // do not end in the middle of a character
    return text;
}

template <class Work>
double median_seconds(int rounds, Work work) {
    std::vector<double> seconds;
    for (int i = 0; i < rounds; ++i) {
        const auto start = Clock::now();
        work();
        seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 7;
    std::size_t mib = 100;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoul(argv[i + 1], nullptr, 10);
    }
    std::printf("%zu MiB of output in a result, median of %d rounds, MB/s of output\n", mib,
                rounds);
    std::printf("%-8s %12s %12s %12s\n", "output", "pysandbox", "nlohmann", "speed-up");
    for (const char* kind : {"flood", "log", "utf-8"}) {
        const json result = {{"status", "ok"}, {"stdout", sample(kind, mib << 20)}};
        const std::string& text = result["stdout"].get_ref<const std::string&>();
        std::size_t sink = 0;
        const double ours = median_seconds(rounds, [&] {
            sink += pysandbox::encoding::is_text(text) ? 1 : 0;
            pysandbox::dump_line_pieces(result,
                                        [&sink](std::string_view piece) { sink += piece.size(); });
        });
        const double theirs = median_seconds(rounds, [&] {
            sink += pysandbox::encoding::is_text(text) ? 1 : 0;
            sink += result.dump(-1, ' ', false, json::error_handler_t::replace).size();
        });
        const double megabytes = static_cast<double>(text.size()) / 1e6;
        std::printf("%-8s %12.0f %12.0f %11.1fx\n", kind, megabytes / ours, megabytes / theirs,
                    theirs / ours);
        if (sink == 0) return 1;  // keeps the work from being optimised away
    }
    return 0;
}
