"""The permutation test of common/statistics/permutation_test.h, done by scipy.

Reads cases as JSON from argv[1]: each has "local" and "field" as lists of
[value, count] (each call at its bucket's mean, as the C++ code takes it),
"statistic" ("mean" or a quantile q), "resamples" and "seed". Writes the
p-values, one per case, as JSON to stdout. scipy.stats.permutation_test
with permutation_type="independent", alternative="greater".
"""
import json
import sys

import numpy as np
from scipy import stats


def expand(cells):
    return np.repeat([v for v, _ in cells], [c for _, c in cells]).astype(float)


def main():
    cases = json.load(open(sys.argv[1]))
    out = []
    for case in cases:
        x, y = expand(case["local"]), expand(case["field"])
        q = case["statistic"]
        if q == "mean":
            def stat(a, b, axis):
                return np.mean(a, axis=axis) - np.mean(b, axis=axis)
        else:
            def stat(a, b, axis, q=q):
                return (np.quantile(a, q, axis=axis, method="inverted_cdf")
                        - np.quantile(b, q, axis=axis, method="inverted_cdf"))
        r = stats.permutation_test((x, y), stat, permutation_type="independent",
                                   alternative="greater", n_resamples=case["resamples"],
                                   vectorized=True, random_state=case["seed"])
        out.append(float(r.pvalue))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
