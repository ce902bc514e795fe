// fieldprof lab merge: several lab profiles (scenarios, machines) as one.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/settings/options.h"
#include "tools/lab/lab_commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/lab_profile.h"

namespace fieldprof::tools {

int LabMerge(int argc, char** argv) {
  std::string output;
  OptionTable t("fieldprof lab merge",
                "Combines lab profiles (scenarios, machines) into one: records of the same\n"
                "key summed exactly, nesting graphs joined, runs listed.\n\n"
                "  fieldprof lab merge -o all.labprofile a.labprofile b.labprofile");
  t.AddString("output", &output, "the merged profile's file (-o)");
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && output.empty()) s = InvalidArgument("--output (-o) is needed");
  if (s.ok() && t.positional().empty()) s = InvalidArgument("give the profiles to merge");
  if (!s.ok()) return UsageError(t, s);
  std::vector<wire::LabProfile> in;
  for (const std::string& f : t.positional()) {
    StatusOr<wire::LabProfile> p = ReadLabProfile(f);
    if (!p.ok()) {
      std::cerr << "fieldprof lab merge: " << p.status().message() << "\n";
      return 1;
    }
    in.push_back(std::move(*p));
  }
  const wire::LabProfile merged = MergeProfiles(in);
  if (Status w = WriteLabProfile(output, merged); !w.ok()) {
    std::cerr << "fieldprof lab merge: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof lab merge: %zu profiles, %d scenarios, %d records -> %s\n",
               in.size(), merged.scenarios_size(), merged.records_size(), output.c_str());
  return 0;
}

}  // namespace fieldprof::tools
