# python3 with threads, for tests/tools/record/host_safety_test.cc.
import hashlib
import sys
import threading

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20000

out = [None] * 4


def work(i):
    h = hashlib.sha256()
    for k in range(rounds):
        h.update(b"%d-%d" % (i, k))
    out[i] = h.hexdigest()[:8]


ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join(out))
