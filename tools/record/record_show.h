// fieldprof record show: any time range of a recording as a call tree
// (top-down or bottom-up), collapsed stacks, a Chrome trace, a pprof
// profile, a page, or where its threads waited.
#ifndef FIELDPROF_TOOLS_RECORD_RECORD_SHOW_H_
#define FIELDPROF_TOOLS_RECORD_RECORD_SHOW_H_

namespace fieldprof::tools {

int RecordShow(int argc, char** argv);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RECORD_SHOW_H_
