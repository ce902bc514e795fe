// fieldprof check's outputs, from the analysis's result alone: the text
// table (with the lab profiles' call stacks), JSON, SARIF 2.1.0 for
// code-scanning tools, JUnit XML for CI.
#ifndef FIELDPROF_TOOLS_CHECK_CHECK_RENDER_H_
#define FIELDPROF_TOOLS_CHECK_CHECK_RENDER_H_

#include <cstdio>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "tools/check/check_analysis.h"
#include "tools/check/check_options.h"

namespace fieldprof::tools {

// What is shown: the findings with evidence, or all with --all.
std::vector<const Finding*> ShownFindings(const CheckResult& r, bool all);

// One finding in a sentence: what it costs you more than the field, with
// the statistics and the adjusted p-value.
std::string FindingSummary(const Finding& f, const CheckOptions& o);

// A fingerprint that stays the same for an API across runs and machines:
// FNV-1a 64 of "module:symbol:metric", in hex.
std::string Fingerprint(const std::string& text);

std::string CheckJson(const CheckResult& r, const CheckOptions& o,
                      const std::vector<wire::LabProfile>& profiles);
std::string CheckSarif(const CheckResult& r, const CheckOptions& o);
std::string CheckJunit(const CheckResult& r, const CheckOptions& o);
// The table; `tty` colours the top findings.
void PrintCheckText(std::FILE* out, const CheckResult& r, const CheckOptions& o,
                    const std::vector<wire::LabProfile>& profiles, int bad_files, bool tty);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_CHECK_CHECK_RENDER_H_
