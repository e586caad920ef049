// Data-parallel training over LibTorch's own c10d process group with the Gloo backend (the
// design's "scale-out uses c10d, not a home-made protocol"). torch.train uses it when
// world_size > 1: every rank runs the same graph, so every rank sees the same batch stream; rank r
// trains on its slice of each batch, gradients are averaged across ranks before each optimizer
// step, and the parameters stay identical everywhere, as with PyTorch's DistributedDataParallel.
//
// Rendezvous, as torch.distributed.init_process_group's init_method:
//   ""                 MASTER_ADDR (else Slurm's first node), MASTER_PORT; rank 0 or torchrun's agent serves the store
//   "tcp://HOST:PORT"  the same with an explicit address
//   "file://PATH"      a FileStore on a filesystem every rank sees (PATH must not exist yet)
// world_size 0 and rank -1 are read from WORLD_SIZE and RANK (torchrun), else SLURM_NTASKS and SLURM_PROCID.
// Only this file includes the c10d headers (and Gloo's): the trainer sees this interface alone.
#pragma once

#include <torch/torch.h>

#include <embedflow/record.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace embedflow::torchfam {

struct DistributedOptions {
  int world_size = 1;
  int rank = 0;
  std::string rendezvous;
  double timeout_s = 300;
  std::string owner;  // the node, for messages
  // The collectives' backend: NCCL when the model trains on a GPU and LibTorch was built with
  // c10d's NCCL (USE_C10D_NCCL, a CUDA LibTorch), Gloo otherwise.
  bool gpu = false;
};
// Whether this build can run NCCL collectives (a CUDA LibTorch with c10d's NCCL).
bool nccl_available();

// Fills world_size 0 / rank -1 from the environment and checks 0 <= rank < world_size;
// `owner` names the node in ConfigErrors.
DistributedOptions resolve_distributed(std::int64_t world_size, std::int64_t rank, const std::string& rendezvous,
                                       double timeout_s, const std::string& owner);

class DataParallelGroup {
 public:
  // Joins the group (blocks until every rank has joined or the timeout passes).
  explicit DataParallelGroup(const DistributedOptions& options);
  ~DataParallelGroup();
  DataParallelGroup(const DataParallelGroup&) = delete;
  DataParallelGroup& operator=(const DataParallelGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Overwrites each tensor with rank 0's value (in place, one message for all of them).
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);
  // Overlaps the gradient reduction with the backward pass, as DistributedDataParallel's reducer
  // does: `parameters` are grouped in reverse order (about the order backward produces their
  // gradients) into buckets of about `bucket_bytes` (the first at most 1 MiB, DDP's default, so
  // the reduction starts early), and an autograd hook on each parameter's gradient accumulator
  // starts a bucket's asynchronous all-reduce once all its gradients are in, in bucket order on
  // every rank. bucket_bytes 0: no hooks, average_gradients reduces everything after backward.
  void overlap_gradients(const std::vector<torch::Tensor>& parameters, std::int64_t bucket_bytes);
  // Replaces each parameter's gradient by the mean over the ranks: waits for the buckets started
  // during backward (and starts those whose parameters the loss did not reach, as zeros), or
  // without overlap_gradients, one flattened all-reduce. Must be called after every backward.
  void average_gradients(const std::vector<torch::Tensor>& parameters);
  // The number of buckets overlap_gradients made (0 without it).
  std::size_t buckets() const;
  // The sum of `value` over the ranks.
  double sum(double value);
  // Element-wise sums over the ranks of equally long vectors, in one all-reduce.
  std::vector<double> sum(const std::vector<double>& values);
  // The same, started now and read by calling the result, so the caller can work meanwhile
  // (every rank must start its collectives in the same order).
  std::function<double()> start_sum(double value);
  // Every rank's `local` rows concatenated in rank order (c10d allgather; the ranks may hold
  // different row counts: the counts are gathered first and the rows padded to the largest).
  // This rank's part is `local` itself, so it keeps its autograd graph; the other ranks' parts are
  // constants, as in pytorch-metric-learning's all_gather. Sets `offset` to this rank's first row.
  torch::Tensor all_gather(const torch::Tensor& local, std::int64_t& offset);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

// Rank r's rows of input batch `index` for data-parallel training (every field with the batch's
// leading dimension is sliced; arrays share their buffers, nothing is copied); sets `full` (the
// batch's rows) and `local` (the rank's).
Record rank_slice(const Record& batch, std::int64_t index, const DataParallelGroup& group, std::int64_t& full,
                  std::int64_t& local);
// A batch split upstream (core.shard, or a reader sharded at the source): this rank's rows of a
// batch of `unsharded_rows` rows, less the `skipped_rows` a reader left out as unreadable. The
// ranks' rows and skipped rows (summed over `group`, null when not data parallel) must add up to
// it, or the sharding node and the trainer disagree on the world. `full` is the rows the ranks
// hold (the batch whose mean loss they train on), `local` this rank's.
void check_shard(const Record& batch, std::int64_t index, DataParallelGroup* group, std::int64_t& full,
                 std::int64_t& local);

}  // namespace embedflow::torchfam
