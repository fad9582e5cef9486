// Copyright ingot authors. Apache-2.0.
//
// A device-side wait for the autotuner's timing (cuda_backend.cc's time_enqueue): one thread spins
// for a number of SM clock cycles, keeping the stream busy while the host queues the timed
// enqueues behind it, so the events between them measure device time alone and not the host's
// enqueue cost (what a CUDA graph replay pays). Plain C++ so host code can call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ingot::backend::cuda {

/// Enqueues a one-thread kernel that returns after `cycles` SM clock cycles (clock64).
cudaError_t launch_spin_wait(int64_t cycles, cudaStream_t stream);

}  // namespace ingot::backend::cuda
