// DataParallelGroup: c10d's ProcessGroupGloo behind the small interface of distributed.hpp.
#include "distributed.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <embedflow/embedflow.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace embedflow::torchfam {

namespace {

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The first host of a Slurm node list: "node[07-09,12],gpu1" -> "node07". Only the first entry
// and the first number of its first range are needed, so no full expansion (scontrol show
// hostnames does that) is attempted.
std::string first_slurm_host(const std::string& list) {
  std::string first;
  int depth = 0;
  for (char c : list) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    first += c;
  }
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  std::string range = first.substr(open + 1);
  range = range.substr(0, range.find_first_of(",-]"));
  return first.substr(0, open) + range;
}

// Where rank 0 serves the store: MASTER_ADDR (torchrun), else the first node of the Slurm step
// or job (srun puts task 0 there), else the node srun was launched from, else this host.
std::string master_address() {
  if (const char* v = std::getenv("MASTER_ADDR"); v && *v) return v;
  for (const char* list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
    if (const char* v = std::getenv(list); v && *v) return first_slurm_host(v);
  return env_string("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1");
}

// The address this host reaches `master` from: the source address of the route to it (a UDP
// socket's connect sends nothing). Gloo's default device is the address the host name resolves to,
// often 127.0.0.1 in /etc/hosts, which the other hosts cannot reach. Empty if unknown.
std::string route_address(const std::string& master, const std::string& port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(master.c_str(), port.c_str(), &hints, &found) != 0 || !found) return "";
  std::string out;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  char text[INET6_ADDRSTRLEN] = {};
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    const void* a = nullptr;
    if (local.ss_family == AF_INET6) a = &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr;
    else a = &reinterpret_cast<sockaddr_in*>(&local)->sin_addr;
    if (inet_ntop(local.ss_family, a, text, sizeof text)) out = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// A collective that fails (Gloo reports a peer that closed its connection at once, and one that
// stops answering after the group's timeout) ends the run with where it happened: this host,
// this rank and Gloo's message, which names the peer's address.
[[noreturn]] void collective_failed(const std::string& what, int rank, int size, const std::string& where,
                                    const std::string& why) {
  throw DataError(cat(what, " failed on host ", host_name(), " (rank ", rank, " of ", size, ", group at ", where,
                      "); a peer rank has probably died or become unreachable: ", why));
}

void wait_collective(const c10::intrusive_ptr<c10d::Work>& work, const char* what, int rank, int size,
                     const std::string& where) {
  try {
    work->wait();
  } catch (const c10::Error& e) {
    collective_failed(what, rank, size, where, e.what_without_backtrace());
  } catch (const std::exception& e) {
    collective_failed(what, rank, size, where, e.what());
  }
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

// Gradients in flight during a backward pass: the parameters' buckets and the all-reduce each
// has started.
struct GradientBuckets {
  struct Bucket {
    std::vector<std::size_t> members;  // indices into parameters
    std::size_t pending = 0;           // members whose gradient this backward has not produced yet
    std::vector<torch::Tensor> flat;   // the one flattened tensor in reduction, once started
    c10::intrusive_ptr<c10d::Work> work;
  };
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::vector<torch::Tensor> parameters;
  std::vector<std::size_t> bucket_of;
  std::vector<char> ready;  // per parameter, this backward
  std::vector<Bucket> buckets;
  std::size_t next = 0;     // the first bucket not started: buckets start in order on every rank
  std::string where;        // the rendezvous, for messages
  // Autograd drops a gradient accumulator nobody holds, and its hooks with it.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  void start(Bucket& b) {
    std::vector<torch::Tensor> grads;
    for (std::size_t i : b.members) {
      torch::Tensor p = parameters[i];  // a handle: setting its grad sets the parameter's
      // A parameter the loss did not reach has no gradient on this rank but may have one on
      // another: it takes part as zeros so every rank reduces the same tensors.
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
    b.flat = {at::flatten_dense_tensors(grads)};
    b.work = group->allreduce(b.flat, c10d::AllreduceOptions{});
  }

  // Called by the hook of parameter i once its gradient is accumulated.
  void gradient_ready(std::size_t i) {
    if (ready[i]) return;
    ready[i] = 1;
    --buckets[bucket_of[i]].pending;
    while (next < buckets.size() && buckets[next].pending == 0) start(buckets[next++]);
  }

  // Starts what the backward pass did not, waits for every bucket and writes the mean back.
  void finish(int rank, int ranks) {
    while (next < buckets.size()) start(buckets[next++]);
    for (auto& b : buckets) {
      wait_collective(b.work, "the gradient all-reduce", rank, ranks, where);
      b.flat[0].div_(static_cast<double>(ranks));
      std::vector<torch::Tensor> grads;
      for (std::size_t i : b.members) grads.push_back(parameters[i].grad());
      auto parts = at::unflatten_dense_tensors(b.flat[0], grads);
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i].copy_(parts[i]);
      b.flat.clear();
      b.work.reset();
      b.pending = b.members.size();
    }
    std::fill(ready.begin(), ready.end(), 0);
    next = 0;
  }
};

bool nccl_available() {
#ifdef USE_C10D_NCCL
  return true;
#else
  return false;
#endif
}

struct DataParallelGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device{torch::kCPU};  // where the collectives' own tensors live (NCCL: the GPU)
  std::shared_ptr<GradientBuckets> overlap;  // null: reduce after backward
  std::string where;                         // the rendezvous, for messages
  bool nccl = false;                         // every rank on a GPU, reducing over NCCL
};


DataParallelGroup::DataParallelGroup(const DistributedOptions& o) : impl_(std::make_unique<Impl>()), rank_(o.rank), size_(o.world_size) {
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  const std::string& r = o.rendezvous;
  std::string where, gloo_address;
  try {
    if (r.rfind("file://", 0) == 0) {
      where = r;
      impl_->store = c10::make_intrusive<c10d::FileStore>(r.substr(7), o.world_size);
      impl_->store->setTimeout(timeout);
    } else {
      std::string host = master_address();
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
      gloo_address = route_address(host, port);
      // Under torchrun's static rendezvous its agent already serves a store on MASTER_PORT: every
      // rank, rank 0 too, connects as a client and keys go under the attempt's prefix, as
      // torch.distributed's env:// init does (torch/distributed/rendezvous.py).
      const bool agent_store = r.empty() && env_string("TORCHELASTIC_USE_AGENT_STORE", "") == "True";
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(std::stoi(port));
      opts.isServer = o.rank == 0 && !agent_store;
      opts.numWorkers = agent_store ? c10::nullopt : c10::optional<std::size_t>(static_cast<std::size_t>(o.world_size));
      opts.waitWorkers = !agent_store;
      opts.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(host, opts);
      if (agent_store) {
        const std::string attempt = env_string("TORCHELASTIC_RESTART_COUNT", "0");
        impl_->store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + attempt, impl_->store);
        where += cat(" (torchrun's agent store, attempt ", attempt, ")");
      }
    }
#ifdef USE_C10D_NCCL
    // NCCL only when every rank trains on a GPU: each rank says whether it does through the
    // store, and one rank without a GPU puts them all on Gloo (which takes CUDA tensors too).
    bool every_rank_gpu = o.gpu;
    impl_->store->set(cat("embedflow/gpu/", o.rank), std::vector<std::uint8_t>{static_cast<std::uint8_t>(o.gpu ? 1 : 0)});
    for (int peer = 0; peer < o.world_size; ++peer)
      if (impl_->store->get(cat("embedflow/gpu/", peer)) != std::vector<std::uint8_t>{1}) every_rank_gpu = false;
    if (o.gpu && !every_rank_gpu) log_warning(o.owner, "a rank trains without a GPU: every rank reduces over Gloo, not NCCL");
    impl_->nccl = every_rank_gpu;
    if (every_rank_gpu) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, o.rank, o.world_size, options);
      impl_->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(c10::cuda::current_device()));
    } else
#endif
    {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // Gloo's own connections between the ranks: over the interfaces GLOO_SOCKET_IFNAME lists
      // (comma-separated, as PyTorch reads it), else from the address that routes to the store's
      // host, else Gloo's default (the address the host name resolves to).
      if (const std::string ifnames = env_string("GLOO_SOCKET_IFNAME", ""); !ifnames.empty()) {
        std::size_t from = 0;
        while (from <= ifnames.size()) {
          const std::size_t comma = std::min(ifnames.find(',', from), ifnames.size());
          if (comma > from)
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifnames.substr(from, comma - from)));
          from = comma + 1;
        }
      } else if (!gloo_address.empty()) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(gloo_address));
      } else {
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, o.rank, o.world_size, options);
    }
  } catch (const c10::Error& e) {
    throw DataError(cat("joining the data-parallel group at ", where, " as rank ", o.rank, " of ", o.world_size,
                        " failed: ", e.what_without_backtrace()));
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {  // c10d's socket errors are not all c10::Errors
    throw DataError(cat("joining the data-parallel group at ", where, " as rank ", o.rank, " of ", o.world_size,
                        " failed: ", e.what()));
  }
  impl_->where = where;
  const std::string local = env_string("LOCAL_RANK", env_string("SLURM_LOCALID", ""));
  log_info(o.owner, "rank ", o.rank, " of ", o.world_size, " joined the ", impl_->nccl ? "NCCL" : "Gloo", " group at ", where, " from host ", host_name(),
           local.empty() ? "" : cat(" (local rank ", local, ")"));
}

DataParallelGroup::~DataParallelGroup() = default;

void DataParallelGroup::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  std::vector<torch::Tensor> flat{at::flatten_dense_tensors(tensors)};
  wait_collective(impl_->group->broadcast(flat, c10d::BroadcastOptions{}), "the broadcast from rank 0", rank_, size_,
                  impl_->where);
  auto parts = at::unflatten_dense_tensors(flat[0], tensors);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(parts[i]);
}

void DataParallelGroup::overlap_gradients(const std::vector<torch::Tensor>& parameters, std::int64_t bucket_bytes) {
  impl_->overlap.reset();
  if (bucket_bytes <= 0 || parameters.empty()) return;
  auto o = std::make_shared<GradientBuckets>();
  o->group = impl_->group;
  o->where = impl_->where;
  o->parameters = parameters;
  o->bucket_of.resize(parameters.size());
  o->ready.assign(parameters.size(), 0);
  constexpr std::int64_t kFirstBucketBytes = 1 << 20;
  std::int64_t cap = std::min(bucket_bytes, kFirstBucketBytes), filled = 0;
  for (std::size_t k = parameters.size(); k-- > 0;) {
    if (o->buckets.empty() || filled >= cap) {
      if (!o->buckets.empty()) cap = bucket_bytes;
      o->buckets.emplace_back();
      filled = 0;
    }
    o->buckets.back().members.push_back(k);
    o->bucket_of[k] = o->buckets.size() - 1;
    filled += parameters[k].numel() * static_cast<std::int64_t>(parameters[k].element_size());
  }
  for (auto& b : o->buckets) b.pending = b.members.size();
  std::weak_ptr<GradientBuckets> weak = o;  // the hooks outlive neither the group nor a new overlap
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(parameters[i]);
    if (!acc) throw ConfigError("data-parallel overlap needs parameters that require gradients");
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto live = weak.lock()) live->gradient_ready(i);
          return outputs;
        }));
    o->accumulators.push_back(std::move(acc));
  }
  impl_->overlap = std::move(o);
}

std::size_t DataParallelGroup::buckets() const { return impl_->overlap ? impl_->overlap->buckets.size() : 0; }

void DataParallelGroup::average_gradients(const std::vector<torch::Tensor>& parameters) {
  if (impl_->overlap) return impl_->overlap->finish(rank_, size_);
  std::vector<torch::Tensor> grads;
  for (torch::Tensor p : parameters) {  // a handle: setting its grad sets the parameter's
    // A parameter the loss did not reach has no gradient on this rank but may have one on
    // another: it takes part as zeros so every rank reduces the same tensors.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat{at::flatten_dense_tensors(grads)};
  wait_collective(impl_->group->allreduce(flat, c10d::AllreduceOptions{}), "the gradient all-reduce", rank_, size_,
                  impl_->where);
  flat[0].div_(static_cast<double>(size_));
  auto parts = at::unflatten_dense_tensors(flat[0], grads);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i].copy_(parts[i]);
}

double DataParallelGroup::sum(double value) { return start_sum(value)(); }

std::vector<double> DataParallelGroup::sum(const std::vector<double>& values) {
  std::vector<torch::Tensor> t{torch::tensor(values, torch::kFloat64).to(impl_->device)};
  auto work = impl_->group->allreduce(t, c10d::AllreduceOptions{});
  wait_collective(work, "the all-reduce of the batch's row counts", rank_, size_, impl_->where);
  const torch::Tensor host = t[0].to(torch::kCPU).contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

std::function<double()> DataParallelGroup::start_sum(double value) {
  std::vector<torch::Tensor> t{torch::tensor({value}, torch::kFloat64).to(impl_->device)};
  auto work = impl_->group->allreduce(t, c10d::AllreduceOptions{});
  return [work, t, rank = rank_, size = size_, where = impl_->where]() {
    wait_collective(work, "the all-reduce of the loss", rank, size, where);
    return t[0].item<double>();
  };
}

torch::Tensor DataParallelGroup::all_gather(const torch::Tensor& local, std::int64_t& offset) {
  const auto on = torch::TensorOptions().dtype(torch::kInt64).device(impl_->device);
  std::vector<torch::Tensor> count{torch::full({1}, local.size(0), on)};
  std::vector<std::vector<torch::Tensor>> counts(1);
  for (int r = 0; r < size_; ++r) counts[0].push_back(torch::empty({1}, on));
  wait_collective(impl_->group->allgather(counts, count), "the gather of the embeddings' row counts", rank_, size_,
                  impl_->where);
  std::vector<std::int64_t> rows;
  std::int64_t most = 0;
  for (const auto& c : counts[0]) {
    rows.push_back(c.item<std::int64_t>());
    most = std::max(most, rows.back());
  }
  torch::Tensor mine = local.detach();
  if (mine.size(0) < most) {  // allgather needs equal shapes: pad with zeros, cut them off after
    std::vector<std::int64_t> pad_shape(mine.sizes().begin(), mine.sizes().end());
    pad_shape[0] = most - mine.size(0);
    mine = torch::cat({mine, torch::zeros(pad_shape, mine.options())}, 0);
  }
  std::vector<torch::Tensor> in{mine.contiguous()};
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < size_; ++r) out[0].push_back(torch::empty_like(in[0]));
  wait_collective(impl_->group->allgather(out, in), "the gather of the embeddings", rank_, size_, impl_->where);
  std::vector<torch::Tensor> parts;
  offset = 0;
  for (int r = 0; r < size_; ++r) {
    if (r < rank_) offset += rows[static_cast<std::size_t>(r)];
    parts.push_back(r == rank_ ? local : out[0][static_cast<std::size_t>(r)].narrow(0, 0, rows[static_cast<std::size_t>(r)]));
  }
  return torch::cat(parts, 0);
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
  const Array* skipped_field = batch.find("skipped_rows");
  local = batch.batch_size();
  const std::int64_t planned = whole.numel() > 0 ? whole.as_int(0) : 0;
  const std::int64_t skipped = skipped_field && skipped_field->numel() > 0 ? skipped_field->as_int(0) : 0;
  std::int64_t total = local, total_skipped = skipped;
  if (group) {
    const std::vector<double> sums = group->sum(std::vector<double>{static_cast<double>(local), static_cast<double>(skipped)});
    total = static_cast<std::int64_t>(std::llround(sums[0]));
    total_skipped = static_cast<std::int64_t>(std::llround(sums[1]));
  }
  if (local == 0 || total + total_skipped != planned)
    throw DataError(cat("input batch ", index, " was sharded upstream from ", planned, " rows, but the ",
                        group ? group->size() : 1, " rank(s) of this training hold ", total,
                        total_skipped > 0 ? cat(" and skipped ", total_skipped, " as unreadable") : "",
                        ": give the sharding node (core.shard, or a reader's shard_world_size and shard_rank) the "
                        "world_size and rank of torch.train"));
  full = total;
}

}  // namespace embedflow::torchfam
