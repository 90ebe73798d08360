// RUN: spmd-opt %s --spmd-pack-entry-functions -split-input-file -verify-diagnostics | FileCheck %s

// An entry function: argument i is loaded from arguments[i], result j is
// stored to results[j], in the signature's order.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[ARGS:.*]]: !llvm.ptr, %[[RES:.*]]: !llvm.ptr) {
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[A:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.getelementptr %[[ARGS]][1]
// CHECK: %[[B:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[C:.*]] = call @combine(%[[A]], %[[B]])
// CHECK: %[[R0:.*]] = llvm.getelementptr %[[RES]][0]
// CHECK: llvm.store %[[C]], %[[R0]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[R1:.*]] = llvm.getelementptr %[[RES]][1]
// CHECK: llvm.store %[[A]], %[[R1]] : !llvm.ptr, !llvm.ptr
// CHECK: return{{$}}
func.func @step(%a: !llvm.ptr, %b: !llvm.ptr) -> (!llvm.ptr, !llvm.ptr) {
  %c = call @combine(%a, %b) : (!llvm.ptr, !llvm.ptr) -> !llvm.ptr
  return %c, %a : !llvm.ptr, !llvm.ptr
}

// Called in the module: its signature stays.
// CHECK-LABEL: func.func @combine(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> !llvm.ptr
func.func @combine(%a: !llvm.ptr, %b: !llvm.ptr) -> !llvm.ptr {
  return %a : !llvm.ptr
}

// Private functions and declarations stay.
// CHECK-LABEL: func.func private @helper(
// CHECK-SAME: -> !llvm.ptr
func.func private @helper(%a: !llvm.ptr) -> !llvm.ptr {
  return %a : !llvm.ptr
}
// CHECK-LABEL: func.func private @spmd_rt_free(!llvm.ptr)
func.func private @spmd_rt_free(!llvm.ptr)

// -----

// No arguments and no results: the two arrays are still the signature.
// CHECK-LABEL: func.func @empty(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) {
// CHECK-NEXT: return
func.func @empty() {
  return
}

// -----

// A number is not a buffer slot.
// expected-error @+1 {{'func.func' op cannot be packed as an entry function: an argument or result is not a buffer (!llvm.ptr): '(!llvm.ptr, f64) -> !llvm.ptr'}}
func.func @scalar(%a: !llvm.ptr, %lr: f64) -> !llvm.ptr {
  return %a : !llvm.ptr
}

// -----

// Only a single-block body has the one return the results are stored at.
// expected-error @+1 {{'func.func' op must have a single block to be packed as an entry function}}
func.func @branches(%a: !llvm.ptr) -> !llvm.ptr {
  llvm.br ^next
^next:
  return %a : !llvm.ptr
}
