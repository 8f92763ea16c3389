#pragma once
// A zygote's job plan, as its helper gets it: the fields of the Plan that the steps a forked job
// runs read (child.cpp, Birth::forked; init.cpp), and only those, as JSON text. The supervisor
// writes it once per zygote into the zygote's sandbox; the helper reads it back into a Plan
// before the zygote serves its first job. Whatever the job steps read that is not here keeps the
// Plan's default, so a step that starts reading a new field must add it here
// (tests/unit/inside/job_spec_test.cpp compares the fields both ways).

#include <memory>
#include <string>
#include <string_view>

#include "plan/plan.hpp"

namespace pysandbox {

std::string write_job_spec(const Plan& plan);

// Throws std::runtime_error (nlohmann's exceptions included) for text that is not a job spec.
std::unique_ptr<Plan> read_job_spec(std::string_view text);

}  // namespace pysandbox
