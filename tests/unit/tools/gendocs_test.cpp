// The documentation generator reads options it has never seen: what their values complete to
// follows from their type names (and a *-dir name), so options added later need no generator
// change.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_model.hpp"
#include "completions.hpp"
#include "man_page.hpp"

using namespace pysandbox::docs;

namespace {

// A CLI shaped like pysandbox's, with options the real one may not have yet.
struct FutureCli {
    FutureCli() {
        CLI::App* run = app.add_subcommand("run", "Run a script");
        run->add_option("--output-dir", text, "Copy artifacts here");
        run->add_option("--workdir", text, "Bind a host directory")->type_name("DIR");
        run->add_option("--input", list, "A file to read")->type_name("FILE[=NAME]");
        run->add_option("--mode", text, "A mode")
            ->type_name("MODE")
            ->check(CLI::IsMember({"fast", "slow"}));
        run->add_option("--allow", list, "HOST:PORT to reach")->type_name("HOST:PORT");
        run->add_flag("--json", flag, "One JSON object");
        run->add_option("script", text, "The script")->type_name("SCRIPT");
        app.add_subcommand("check", "Check a script")
            ->add_option("-p,--profile", text, "Profile")
            ->type_name("PROFILE");
    }
    const OptionDoc& option(const CommandDoc& command, const std::string& name) {
        for (const auto& o : command.options)
            if (!o.long_names.empty() && o.long_names[0] == name) return o;
        FAIL("no option --" << name);
        return command.options.front();
    }

    CLI::App app{"test", "pysandbox"};
    std::string text;
    std::vector<std::string> list;
    bool flag = false;
};

}  // namespace

TEST_SUITE("gendocs") {
    TEST_CASE("value kinds follow type names, not option names") {
        FutureCli cli;
        CommandDoc root = describe(cli.app);
        REQUIRE(root.subcommands.size() == 2);
        const CommandDoc& run = root.subcommands[0];
        CHECK(cli.option(run, "output-dir").kind == ValueKind::directory);
        CHECK(cli.option(run, "workdir").kind == ValueKind::directory);
        CHECK(cli.option(run, "input").kind == ValueKind::file);
        CHECK(cli.option(run, "input").repeatable);
        CHECK(cli.option(run, "mode").kind == ValueKind::choice);
        CHECK(cli.option(run, "mode").choices == std::vector<std::string>{"fast", "slow"});
        CHECK(cli.option(run, "mode").value_name == "MODE");
        CHECK(cli.option(run, "allow").kind == ValueKind::text);
        CHECK(cli.option(run, "allow").value_name == "HOST:PORT");
        CHECK(cli.option(run, "json").kind == ValueKind::none);
        REQUIRE(run.positionals.size() == 1);
        CHECK(run.positionals[0].kind == ValueKind::file);
        CHECK(cli.option(root.subcommands[1], "profile").kind == ValueKind::profile);
    }

    TEST_CASE("every shell and the man page get the new options and commands") {
        FutureCli cli;
        CommandDoc root = describe(cli.app);
        std::string bash = bash_tables(root);
        CHECK(bash.find("'run|--output-dir') REPLY='directory'") != std::string::npos);
        CHECK(bash.find("'check|-p'|'check|--profile') REPLY='profile'") != std::string::npos);
        CHECK(bash.find("'') REPLY='run check'") != std::string::npos);
        CHECK(zsh_functions(root).find("'--workdir=[Bind a host directory]:DIR:_files -/'") !=
              std::string::npos);
        CHECK(fish_tables(root).find("-l output-dir -x -a '(__fish_complete_directories)'") !=
              std::string::npos);
        std::string man = man_commands(root);
        CHECK(man.find("\\fB\\-\\-input\\fR \\fIFILE[=NAME]\\fR") != std::string::npos);
        CHECK(man.find(".SS \"pysandbox check\"") != std::string::npos);
        CHECK(man_synopsis(root).find("\\fBpysandbox check\\fR [\\fIoptions\\fR]") !=
              std::string::npos);
    }
}
