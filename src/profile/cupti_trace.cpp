// LD_PRELOAD tracer (scripts/device/trace.sh): records every kernel's GPU start/end with CUPTI's activity API,
// graph-launched kernels included, and writes them as CSV at exit. Shows where a CUDA-graph decode step's time
// goes (kernel by kernel, and the gaps between them), which ncu cannot: it serialises and times kernels alone.
// Memory copies are rows too (name "memcpy <kind> <bytes>", grid and block 0); stream and channel say which stream
// and hardware channel each ran on (a graph's internal streams). DSERVE_TRACE_LATENCY=1 also records when each launch
// was queued and submitted (0 where CUPTI does not know, e.g. graph nodes).
// Usage: DSERVE_TRACE_OUT=trace.csv LD_PRELOAD=libds_cupti_trace.so dserve bench-one-batch ...
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  std::string name;
  uint64_t start, end;
  uint32_t graph_id, correlation;
  uint64_t graph_node;
  uint32_t grid, block;
  uint32_t stream = 0, channel = 0;
  uint64_t queued = 0, submitted = 0;
};

std::mutex g_mu;
std::vector<Row>* g_rows = nullptr;  // leaked on purpose: written from CUPTI's buffer callbacks until exit
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      Row r{"memcpy " + std::to_string(m->copyKind) + " " + std::to_string(m->bytes), m->start, m->end, m->graphId,
            m->correlationId, m->graphNodeId, 0, 0};
      r.stream = m->streamId;
      r.channel = m->channelID;
      g_rows->push_back(std::move(r));
      continue;
    }
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    Row r{k->name ? k->name : "?", k->start, k->end, k->graphId, k->correlationId, k->graphNodeId,
          static_cast<uint32_t>(k->gridX * k->gridY * k->gridZ), static_cast<uint32_t>(k->blockX * k->blockY * k->blockZ)};
    r.stream = k->streamId;
    r.channel = k->channelID;
    r.queued = k->queued;
    r.submitted = k->submitted;
    g_rows->push_back(std::move(r));
  }
  std::free(buffer);
}

void write_csv() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_rows->empty()) return;  // e.g. a wrapper process (timeout) that inherited LD_PRELOAD
  const char* env = std::getenv("DSERVE_TRACE_OUT");
  const std::string path = env && *env ? env : "cupti_trace.csv";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cupti_trace: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "start_ns,end_ns,graph_id,correlation,graph_node,grid,block,stream,channel,queued_ns,submitted_ns,name\n");
  for (const Row& r : *g_rows)
    std::fprintf(f, "%llu,%llu,%u,%u,%llu,%u,%u,%u,%u,%llu,%llu,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.graph_id, r.correlation,
                 static_cast<unsigned long long>(r.graph_node), r.grid, r.block, r.stream, r.channel,
                 static_cast<unsigned long long>(r.queued), static_cast<unsigned long long>(r.submitted), r.name.c_str());
  const bool ok = std::fclose(f) == 0;
  std::fprintf(stderr, "cupti_trace: %zu kernels -> %s%s\n", g_rows->size(), path.c_str(), ok ? "" : " (write failed)");
}

__attribute__((constructor)) void start_trace() {
  g_rows = new std::vector<Row>();
  g_rows->reserve(1 << 20);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cupti_trace: could not enable kernel activity records\n");
    return;
  }
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS)
    std::fprintf(stderr, "cupti_trace: could not enable memcpy activity records\n");
  const char* lat = std::getenv("DSERVE_TRACE_LATENCY");
  if (lat && *lat == '1' && cuptiActivityEnableLatencyTimestamps(1) != CUPTI_SUCCESS)
    std::fprintf(stderr, "cupti_trace: could not enable latency timestamps\n");
  std::atexit(write_csv);
}

}  // namespace
