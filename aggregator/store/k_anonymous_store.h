// What readers see of a store: only the series that at least k distinct
// machines have added to (all time, by the series' machine sketch), so
// nothing seen on fewer machines than that is published — not in the
// snapshot, the /v1 reads, the dashboard or vendor reports. A module is
// seen only through its series, so a module on fewer than k machines is
// nowhere either.
//
// Nothing is changed in the sums: a series withheld today appears whole,
// its entire history, as soon as its k-th machine adds to it.
//
// Batches are applied to the store beneath as always (ApplyBatch and the
// rest pass through). k <= 1 publishes everything; main.cc then does not
// wrap the store at all.
#ifndef FIELDPROF_AGGREGATOR_STORE_K_ANONYMOUS_STORE_H_
#define FIELDPROF_AGGREGATOR_STORE_K_ANONYMOUS_STORE_H_

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "aggregator/store/machine_sketch.h"
#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

// What the whole store holds back until k machines have sent it, as of one
// walk over every series: the series, the modules none of whose series is
// published, and the most machines any held-back series has (below k by
// definition; how many distinct machines sent held-back series together
// is not known: each series counts its machines with entries of its own,
// machine_sketch.h). Counts only, never which series. -1 before the first
// walk.
struct WithheldTotals {
  int64_t series = -1, modules = -1, machines = -1;
  std::chrono::steady_clock::time_point at{};  // when the walk ended
  std::chrono::steady_clock::duration took{};  // how long it took
};

class KAnonymousStore : public Store {
 public:
  // `inner` must outlive this.
  KAnonymousStore(Store* inner, int k) : inner_(inner), k_(k) {}

  bool Published(const ApiAggregate& a) const;
  int k() const { return k_; }

  // What is held back over the whole store: the last walk over every
  // series (a publish cycle, a reader's) while it is younger than ten
  // times what it took and than `max_age`, else a walk now (one at a time;
  // others wait for it). So a small store is always counted afresh, and a
  // large one spends at most a tenth of a core on these walks.
  // Counts only: what readers may be told whatever they asked for (a count
  // under a filter they chose could tell a name seen on too few machines).
  [[nodiscard]] StatusOr<WithheldTotals> Totals(std::chrono::seconds max_age);

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view body,
                                   int32_t day) override {
    return inner_->ApplyBatch(batch, body, day);
  }
  StatusOr<ApplyResult> ApplyBatchFoldLater(const BatchView& batch, std::string_view body,
                                            int32_t day, std::function<void()>* fold) override {
    return inner_->ApplyBatchFoldLater(batch, body, day, fold);
  }
  StatusOr<bool> BatchAccepted(std::string_view batch_id) override {
    return inner_->BatchAccepted(batch_id);
  }
  uint64_t pending_batches() override { return inner_->pending_batches(); }
  uint64_t DataVersion() override { return inner_->DataVersion(); }
  Status WaitApplied(std::chrono::milliseconds timeout) override {
    return inner_->WaitApplied(timeout);
  }
  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override;
  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override;
  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override;
  Status ForEachApiInRange(const ApiFilter& filter, int32_t first_day, int32_t last_day,
                           const std::function<bool(ApiAggregate&&)>& visit) override;
  Status Health() override { return inner_->Health(); }
  // The inner store's lines, then fieldprof_k_anonymity and the series and
  // modules withheld as of the last walk over everything (a publish cycle).
  void AppendMetrics(std::string* out) override;
  Status Close() override { return inner_->Close(); }

 private:
  // ForEachApi, and where each rare stack folded to (stack_others.h).
  Status Walk(const ApiFilter& filter, const std::function<bool(ApiAggregate&&)>& visit,
              std::map<std::string, std::string>* folded_into);

  Store* const inner_;
  const int k_;
  std::mutex walk_mu_;  // held through a walk Totals makes
  mutable std::mutex last_mu_;
  WithheldTotals last_;  // GUARDED_BY(last_mu_); of the last whole walk
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_K_ANONYMOUS_STORE_H_
