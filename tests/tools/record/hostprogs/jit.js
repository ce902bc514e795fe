// node with JIT-compiled hot code, for tests/tools/record/host_safety_test.cc
// (run with --perf-basic-prof, node writes /tmp/perf-PID.map).
function hotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 31) % 1000003;
  return s;
}
let t = 0;
for (let k = 0; k < 40; k++) t += hotLoop(1000000);
console.log("sum", t);
