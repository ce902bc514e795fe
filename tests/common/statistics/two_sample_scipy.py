"""The two-sample test of common/statistics/permutation_test.h (TwoSampleMeanTest),
done by scipy.

Reads cases as JSON from argv[1]: each has "a" and "b" (per-run values)
and "resamples". Writes the p-values, one per case, as JSON to stdout.
scipy.stats.permutation_test with permutation_type="independent", the
statistic |mean(a) - mean(b)| and alternative="greater": exact when the
relabellings are at most "resamples", else that many drawn.
"""
import json
import sys

import numpy as np
from scipy import stats


def main():
    cases = json.load(open(sys.argv[1]))
    out = []
    for case in cases:
        def stat(a, b, axis):
            return np.abs(np.mean(a, axis=axis) - np.mean(b, axis=axis))
        r = stats.permutation_test((np.array(case["a"], float), np.array(case["b"], float)),
                                   stat, permutation_type="independent",
                                   alternative="greater", n_resamples=case["resamples"],
                                   vectorized=True, random_state=1)
        out.append(float(r.pvalue))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
