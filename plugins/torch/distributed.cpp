// DataParallelGroup: c10d's ProcessGroupGloo behind the small interface of distributed.hpp.
#include "distributed.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <embedflow/embedflow.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace embedflow::torchfam {

namespace {

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

DistributedOptions resolve_distributed(std::int64_t world_size, std::int64_t rank, const std::string& rendezvous,
                                       double timeout_s, const std::string& owner) {
  DistributedOptions o;
  ParallelPlace place;
  try {
    place = resolve_parallel_place(world_size, rank);  // the SDK's, so core.shard agrees
  } catch (const ConfigError& e) {
    throw ConfigError(cat(owner, ": ", e.what()));
  }
  o.world_size = static_cast<int>(place.world_size);
  o.rank = static_cast<int>(place.rank);
  o.rendezvous = rendezvous;
  o.timeout_s = timeout_s;
  o.owner = owner;
  return o;
}

struct DataParallelGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

DataParallelGroup::DataParallelGroup(const DistributedOptions& o) : impl_(std::make_unique<Impl>()), rank_(o.rank), size_(o.world_size) {
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  const std::string& r = o.rendezvous;
  std::string where;
  try {
    if (r.rfind("file://", 0) == 0) {
      where = r;
      impl_->store = c10::make_intrusive<c10d::FileStore>(r.substr(7), o.world_size);
      impl_->store->setTimeout(timeout);
    } else {
      std::string host = env_string("MASTER_ADDR", "127.0.0.1");
      std::string port = env_string("MASTER_PORT", "29500");
      if (r.rfind("tcp://", 0) == 0) {
        std::string hp = r.substr(6);
        auto colon = hp.rfind(':');
        if (colon == std::string::npos) throw ConfigError(cat("rendezvous '", r, "' needs a port: tcp://HOST:PORT"));
        host = hp.substr(0, colon);
        port = hp.substr(colon + 1);
      } else if (!r.empty()) {
        throw ConfigError(cat("rendezvous '", r, "' is neither tcp://HOST:PORT nor file://PATH (empty: MASTER_ADDR/MASTER_PORT)"));
      }
      where = cat("tcp://", host, ":", port);
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(std::stoi(port));
      opts.isServer = o.rank == 0;
      opts.numWorkers = static_cast<std::size_t>(o.world_size);
      opts.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(host, opts);
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, o.rank, o.world_size, options);
  } catch (const c10::Error& e) {
    throw DataError(cat("joining the data-parallel group at ", where, " as rank ", o.rank, " of ", o.world_size,
                        " failed: ", e.what_without_backtrace()));
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {  // c10d's socket errors are not all c10::Errors
    throw DataError(cat("joining the data-parallel group at ", where, " as rank ", o.rank, " of ", o.world_size,
                        " failed: ", e.what()));
  }
  log_info(o.owner, "rank ", o.rank, " of ", o.world_size, " joined the Gloo group at ", where);
}

DataParallelGroup::~DataParallelGroup() = default;

void DataParallelGroup::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  std::vector<torch::Tensor> flat{at::flatten_dense_tensors(tensors)};
  impl_->group->broadcast(flat, c10d::BroadcastOptions{})->wait();
  auto parts = at::unflatten_dense_tensors(flat[0], tensors);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(parts[i]);
}

void DataParallelGroup::average_gradients(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> grads;
  for (torch::Tensor p : parameters) {  // a handle: setting its grad sets the parameter's
    // A parameter the loss did not reach has no gradient on this rank but may have one on
    // another: it takes part as zeros so every rank reduces the same tensors.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat{at::flatten_dense_tensors(grads)};
  impl_->group->allreduce(flat, c10d::AllreduceOptions{})->wait();
  flat[0].div_(static_cast<double>(size_));
  auto parts = at::unflatten_dense_tensors(flat[0], grads);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i].copy_(parts[i]);
}

double DataParallelGroup::sum(double value) {
  std::vector<torch::Tensor> t{torch::tensor({value}, torch::kFloat64)};
  impl_->group->allreduce(t, c10d::AllreduceOptions{})->wait();
  return t[0].item<double>();
}

Record rank_slice(const Record& batch, std::int64_t index, const DataParallelGroup& group, std::int64_t& full,
                  std::int64_t& local) {
  full = batch.batch_size();
  const ParallelPlace place{group.size(), group.rank()};
  if (full < place.world_size)
    throw DataError(cat("input batch ", index, " has ", full, " rows, fewer than the ", place.world_size,
                        " ranks of data-parallel training"));
  const RowRange mine = rank_rows(full, place);  // core.shard gives a rank the same rows
  local = mine.last - mine.first;
  Record shard;
  for (const auto& [name, array] : batch.fields())
    shard.set(name, !array.shape().empty() && array.shape()[0] == full ? array.slice(mine.first, mine.last) : array);
  return shard;
}

void check_shard(const Record& batch, std::int64_t index, DataParallelGroup* group, std::int64_t& full,
                 std::int64_t& local) {
  const Array& whole = batch.get("unsharded_rows");
  local = batch.batch_size();
  full = whole.numel() > 0 ? whole.as_int(0) : 0;
  const std::int64_t total = group ? static_cast<std::int64_t>(std::llround(group->sum(static_cast<double>(local)))) : local;
  if (local == 0 || total != full)
    throw DataError(cat("input batch ", index, " was sharded by core.shard from ", full, " rows, but the ",
                        group ? group->size() : 1, " rank(s) of this training hold ", total,
                        ": give core.shard the world_size and rank of torch.train"));
}

}  // namespace embedflow::torchfam
