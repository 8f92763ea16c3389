// toml++ with no guard in front of it, for tests/unit/plan/toml_prescan_test.cpp: parses standard
// input with toml::parse and exits 0 (parsed) or 1 (toml::parse_error, printed on stdout).
//
// tests/CMakeLists.txt builds it with -fsanitize=unreachable -fsanitize-undefined-trap-on-error
// and nothing else (in the sanitizer build too), so reaching __builtin_unreachable() inside
// toml++ executes a trap instruction: the process dies by SIGILL. A plain -O2 build of toml++ 3.3
// gives no sign at all on the inputs the guard refuses (it happens to report an ordinary parse
// error or parse right), so the undefined behaviour can only be observed this way.

#include <toml++/toml.h>

#include <iostream>
#include <iterator>
#include <string>

int main() {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    try {
        (void)toml::parse(text);
        return 0;
    } catch (const toml::parse_error& e) {
        std::cout << e.source().begin.line << ":" << e.source().begin.column << ": "
                  << e.description() << "\n";
        return 1;
    }
}
