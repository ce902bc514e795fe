# python3 with threads, for tests/tools/local/host_safety_test.cc.
import hashlib
import threading

out = [None] * 4


def work(i):
    h = hashlib.sha256()
    for k in range(20000):
        h.update(b"%d-%d" % (i, k))
    out[i] = h.hexdigest()[:8]


ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join(out))
