//===- Builtin.cpp - registration of the built-in ParallelModes -----------===//

#include "spmd/Parallel/DataParallel.h"

void spmd::registerBuiltinParallelModes() {
  registerDDPMode();
  registerFSDPMode();
  registerTPMode();
  registerFSDPTPMode();
}
