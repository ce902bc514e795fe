// fieldprof points field (points_field.cc): the field's sums of a module's
// instrumentation points.
#ifndef FIELDPROF_TOOLS_POINTS_POINTS_FIELD_H_
#define FIELDPROF_TOOLS_POINTS_POINTS_FIELD_H_

namespace fieldprof::tools {

// argv[0] is "field".
int PointsField(int argc, char** argv);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_POINTS_POINTS_FIELD_H_
