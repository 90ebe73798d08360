//===- RuntimeKernelsTest.cpp - Tests of the runtime's CPU kernels --------===//
//
// Small hand-checked cases for every kernel of the "CPU kernels" section of
// spmd/Runtime/Runtime.h. Expected floating-point values were computed by
// hand or, where marked, with PyTorch 1.13 (the semantics the kernels
// follow); the random kernels are checked for properties that hold for any
// uniform source.
//
//===----------------------------------------------------------------------===//

#include "spmd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

struct BufferDeleter {
  void operator()(SpmdBuffer *b) const { spmd_rt_free(b); }
};
using Buffer = std::unique_ptr<SpmdBuffer, BufferDeleter>;
using Shape = std::vector<int64_t>;

template <typename T> SpmdDType dtypeOf();
template <> SpmdDType dtypeOf<float>() { return SPMD_F32; }
template <> SpmdDType dtypeOf<double>() { return SPMD_F64; }
template <> SpmdDType dtypeOf<int64_t>() { return SPMD_I64; }
template <> SpmdDType dtypeOf<int32_t>() { return SPMD_I32; }
template <> SpmdDType dtypeOf<uint8_t>() { return SPMD_I1; }

Buffer empty(SpmdDType dtype, const Shape &shape) {
  return Buffer(
      spmd_rt_alloc(dtype, static_cast<int32_t>(shape.size()), shape.data()));
}

template <typename T> Buffer tensor(const Shape &shape, std::vector<T> values) {
  Buffer b = empty(dtypeOf<T>(), shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), b->numel);
  std::memcpy(b->data, values.data(), values.size() * sizeof(T));
  return b;
}
Buffer f32(const Shape &shape, std::vector<float> values) {
  return tensor<float>(shape, std::move(values));
}
Buffer f64(const Shape &shape, std::vector<double> values) {
  return tensor<double>(shape, std::move(values));
}
Buffer i64(const Shape &shape, std::vector<int64_t> values) {
  return tensor<int64_t>(shape, std::move(values));
}
Buffer i32(const Shape &shape, std::vector<int32_t> values) {
  return tensor<int32_t>(shape, std::move(values));
}
Buffer i1(const Shape &shape, std::vector<uint8_t> values) {
  return tensor<uint8_t>(shape, std::move(values));
}
/// 0, 1, 2, ... of `shape`.
template <typename T> Buffer iota(const Shape &shape) {
  Buffer b = empty(dtypeOf<T>(), shape);
  for (int64_t i = 0; i < b->numel; ++i)
    static_cast<T *>(b->data)[i] = static_cast<T>(i);
  return b;
}

template <typename T> std::vector<T> values(const Buffer &b) {
  const T *p = static_cast<const T *>(b->data);
  return std::vector<T>(p, p + b->numel);
}

Shape shapeOf(const Buffer &b) { return Shape(b->shape, b->shape + b->rank); }

/// Elementwise |actual - expected| <= atol + rtol * |expected| (NaN matches
/// NaN, infinities must be equal).
template <typename T>
void expectNear(const Buffer &b, const std::vector<T> &expected,
                double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(dtypeOf<T>(), b->dtype);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), b->numel);
  std::vector<T> actual = values<T>(b);
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << "at " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << "at " << i;
      continue;
    }
    EXPECT_NEAR(actual[i], expected[i],
                atol + rtol * std::fabs(static_cast<double>(expected[i])))
        << "at " << i;
  }
}
void expectF32(const Buffer &b, const std::vector<float> &expected,
               double rtol = 1e-5, double atol = 1e-6) {
  expectNear<float>(b, expected, rtol, atol);
}
template <typename T>
void expectExact(const Buffer &b, const std::vector<T> &expected) {
  ASSERT_EQ(dtypeOf<T>(), b->dtype);
  EXPECT_EQ(values<T>(b), expected);
}

/// Death tests fork while OpenBLAS may have started threads.
class RuntimeKernelsDeathTest : public ::testing::Test {
protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

//===----------------------------------------------------------------------===//
// bf16: the f32 kernel on exact widened copies, each result rounded once
//===----------------------------------------------------------------------===//

/// bf16 bits of `v`, nearest even (c10::BFloat16); the tests use values
/// without NaNs.
uint16_t bf16Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
float bf16Value(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}
Buffer bf16(const Shape &shape, const std::vector<float> &values) {
  Buffer b = empty(SPMD_BF16, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), b->numel);
  for (size_t i = 0; i < values.size(); ++i)
    static_cast<uint16_t *>(b->data)[i] = bf16Bits(values[i]);
  return b;
}
/// A bf16 buffer's values must equal `expected` rounded to bf16, exactly.
void expectBf16(const Buffer &b, const std::vector<float> &expected) {
  ASSERT_EQ(SPMD_BF16, b->dtype);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), b->numel);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(bf16Value(static_cast<const uint16_t *>(b->data)[i]),
              bf16Value(bf16Bits(expected[i])))
        << "at " << i;
}

TEST(RuntimeKernels, Bf16ElementwiseRoundsOnceOnStore) {
  // Computed in f32 and rounded once: 1 + 2 * 2^-8 is the bf16 1 + 2^-7.
  Buffer a = bf16({3}, {1, 256, -3});
  Buffer b = bf16({3}, {0.00390625f, 1, 0.5f});
  Buffer out = empty(SPMD_BF16, {3});
  spmd_rt_add_tensor(out.get(), a.get(), b.get(), 2.0);
  expectBf16(out, {1.0078125f, 258, -2});
  // Mixed dtypes: a bf16 operand of an f32 op is widened exactly.
  Buffer wide = f32({3}, {0.1f, 0.2f, 0.3f});
  Buffer sum = empty(SPMD_F32, {3});
  spmd_rt_add_tensor(sum.get(), a.get(), wide.get(), 1.0);
  expectF32(sum, {1.1f, 256.2f, -2.7f});
}

TEST(RuntimeKernels, Bf16ReductionAccumulatesInFloat) {
  // 256 ones and 1024 steps of 1/4: a bf16 accumulator stops at 256 (256 +
  // 0.25 rounds back to 256), a float one reaches 512.
  std::vector<float> v(1280, 0.25f);
  for (int i = 0; i < 256; ++i)
    v[i] = 1;
  Buffer x = bf16({1280}, v);
  Buffer out = empty(SPMD_BF16, {});
  const int64_t dims[] = {0};
  spmd_rt_sum(out.get(), x.get(), 1, dims);
  expectBf16(out, {512});
}

TEST(RuntimeKernels, Bf16MatmulAndListsAndSeveralResults) {
  Buffer a = bf16({2, 2}, {1, 2, 3, 4});
  Buffer b = bf16({2, 2}, {0.5f, 1, 1.5f, 2});
  Buffer out = empty(SPMD_BF16, {2, 2});
  spmd_rt_mm(out.get(), a.get(), b.get());
  expectBf16(out, {3.5f, 5, 7.5f, 11});
  // A list of inputs (cat), one of them bf16.
  Buffer c = f32({1, 2}, {5, 6});
  const SpmdBuffer *ins[] = {a.get(), c.get()};
  Buffer cat = empty(SPMD_BF16, {3, 2});
  spmd_rt_cat(cat.get(), 2, ins, 0);
  expectBf16(cat, {1, 2, 3, 4, 5, 6});
  // Several results, each rounded: layer norm of [1, 2, 3] (mean 2, rstd
  // 1 / sqrt(2/3 + eps)).
  Buffer x = bf16({1, 3}, {1, 2, 3});
  Buffer y = empty(SPMD_BF16, {1, 3}), mean = empty(SPMD_BF16, {1, 1}),
         rstd = empty(SPMD_BF16, {1, 1});
  spmd_rt_native_layer_norm(y.get(), mean.get(), rstd.get(), x.get(), nullptr,
                            nullptr, 1, 1e-5);
  const float r = 1.0f / std::sqrt(2.0f / 3 + 1e-5f);
  expectBf16(y, {-r, 0, r});
  expectBf16(mean, {2});
  expectBf16(rstd, {r});
}

//===----------------------------------------------------------------------===//
// Borrowed buffers
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, BorrowedBufferIsReadInPlaceAndNeverFreed) {
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  const int64_t live = spmd_rt_live_bytes();
  const int64_t shape[] = {2, 3};
  Buffer borrowed(spmd_rt_borrow(SPMD_F32, 2, shape, host.data()));
  EXPECT_EQ(borrowed->data, host.data());
  EXPECT_EQ(spmd_rt_live_bytes(), live);
  // A view shares the caller's memory; freeing both leaves it alone.
  const int64_t flat[] = {6};
  Buffer view(spmd_rt_view(borrowed.get(), 1, flat));
  Buffer out = empty(SPMD_F32, {6});
  spmd_rt_add_tensor(out.get(), view.get(), view.get(), 1.0);
  expectF32(out, {2, 4, 6, 8, 10, 12});
  view.reset();
  borrowed.reset();
  EXPECT_EQ(host, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

//===----------------------------------------------------------------------===//
// Broadcasting elementwise ops
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, AddTensorSameShapeWithAlpha) {
  Buffer a = f32({2, 2}, {1, 2, 3, 4});
  Buffer b = f32({2, 2}, {10, 20, 30, 40});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_add_tensor(out.get(), a.get(), b.get(), 2.0);
  expectF32(out, {21, 42, 63, 84});
}

TEST(RuntimeKernels, AddTensorBroadcastsRowAndColumn) {
  Buffer a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer row = f32({3}, {10, 20, 30});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_add_tensor(out.get(), a.get(), row.get(), 1.0);
  expectF32(out, {11, 22, 33, 14, 25, 36});

  // [2, 1] + [1, 3]: both operands broadcast.
  Buffer col = f32({2, 1}, {1, 2});
  Buffer row2 = f32({1, 3}, {10, 20, 30});
  spmd_rt_add_tensor(out.get(), col.get(), row2.get(), 1.0);
  expectF32(out, {11, 21, 31, 12, 22, 32});
}

TEST(RuntimeKernels, AddTensorLargeBroadcastMatchesLoop) {
  // Long rows exercise the vectorised loops with an invariant operand.
  const int64_t rows = 7, cols = 301;
  Buffer a = iota<float>({rows, cols});
  Buffer col = iota<float>({rows, 1});
  Buffer out = empty(SPMD_F32, {rows, cols});
  spmd_rt_add_tensor(out.get(), a.get(), col.get(), -1.0);
  std::vector<float> expected;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      expected.push_back(static_cast<float>(i * cols + j - i));
  expectF32(out, expected);
}

TEST(RuntimeKernels, SubTensorZeroDimOther) {
  Buffer a = f32({3}, {1, 2, 3});
  Buffer b = f32({}, {5});
  Buffer out = empty(SPMD_F32, {3});
  spmd_rt_sub_tensor(out.get(), a.get(), b.get(), 2.0);
  expectF32(out, {-9, -8, -7});
}

TEST(RuntimeKernels, SubTensorI64WithAlpha) {
  Buffer a = i64({2}, {10, -1});
  Buffer b = i64({2}, {2, 4});
  Buffer out = empty(SPMD_I64, {2});
  spmd_rt_sub_tensor(out.get(), a.get(), b.get(), 3.0);
  expectExact<int64_t>(out, {4, -13});
}

TEST(RuntimeKernels, MulTensorBroadcastsMiddleDims) {
  Buffer a = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Buffer b = f32({1, 2, 1}, {10, 100});
  Buffer out = empty(SPMD_F32, {2, 2, 3});
  spmd_rt_mul_tensor(out.get(), a.get(), b.get());
  expectF32(out, {10, 20, 30, 100, 200, 300, 40, 50, 60, 400, 500, 600});
}

TEST(RuntimeKernels, MulTensorOutRankAboveInputs) {
  Buffer a = f32({3}, {1, 2, 3});
  Buffer b = f32({2, 1}, {2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_mul_tensor(out.get(), a.get(), b.get());
  expectF32(out, {2, 4, 6, 3, 6, 9});
}

TEST(RuntimeKernels, MulTensorI32) {
  Buffer a = i32({2}, {3, -4});
  Buffer b = i32({2}, {5, 6});
  Buffer out = empty(SPMD_I32, {2});
  spmd_rt_mul_tensor(out.get(), a.get(), b.get());
  expectExact<int32_t>(out, {15, -24});
}

TEST(RuntimeKernels, DivTensorIntegersIsTrueDivision) {
  Buffer a = i64({3}, {7, -7, 1});
  Buffer b = i32({3}, {2, 2, 4});
  Buffer out = empty(SPMD_F32, {3});
  spmd_rt_div_tensor(out.get(), a.get(), b.get());
  expectF32(out, {3.5f, -3.5f, 0.25f});
}

TEST(RuntimeKernels, DivTensorF64Broadcast) {
  Buffer a = f64({2, 2}, {1, 2, 3, 4});
  Buffer b = f64({2}, {2, 8});
  Buffer out = empty(SPMD_F64, {2, 2});
  spmd_rt_div_tensor(out.get(), a.get(), b.get());
  expectNear<double>(out, {0.5, 0.25, 1.5, 0.5});
}

TEST(RuntimeKernels, AddTensorMixedDtypesConvert) {
  Buffer a = f32({2}, {1.5f, 2.5f});
  Buffer b = i64({2}, {1, 2});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_add_tensor(out.get(), a.get(), b.get(), 1.0);
  expectF32(out, {2.5f, 4.5f});
}

TEST(RuntimeKernels, AddTensorI64IsExact) {
  // 2^53 + 1 is not a double: an int64 path is needed.
  Buffer a = i64({1}, {9007199254740993LL});
  Buffer b = i64({1}, {1});
  Buffer out = empty(SPMD_I64, {1});
  spmd_rt_add_tensor(out.get(), a.get(), b.get(), 1.0);
  expectExact<int64_t>(out, {9007199254740994LL});
}

TEST(RuntimeKernels, Addcmul) {
  Buffer self = f32({2}, {1, 2});
  Buffer t1 = f32({2, 1}, {1, 2});
  Buffer t2 = f32({2}, {3, 4});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_addcmul(out.get(), self.get(), t1.get(), t2.get(), 0.5);
  expectF32(out, {2.5f, 4, 4, 6});
}

TEST(RuntimeKernels, Addcdiv) {
  Buffer self = f32({2}, {1, 1});
  Buffer t1 = f32({2}, {2, 3});
  Buffer t2 = f32({2}, {4, 6});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_addcdiv(out.get(), self.get(), t1.get(), t2.get(), 2.0);
  expectF32(out, {2, 2});
}

TEST(RuntimeKernels, ThresholdBackward) {
  Buffer grad = f32({4}, {1, 2, 3, 4});
  Buffer self = f32({4}, {-1, 0, 0.5f, 2});
  Buffer out = empty(SPMD_F32, {4});
  spmd_rt_threshold_backward(out.get(), grad.get(), self.get(), 0.5);
  expectF32(out, {0, 0, 0, 4});
  spmd_rt_threshold_backward(out.get(), grad.get(), self.get(), 0.0);
  expectF32(out, {0, 0, 3, 4});
}

//===----------------------------------------------------------------------===//
// Tensor-scalar and unary ops
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, AddScalarI64ZeroDim) {
  Buffer self = i64({}, {5});
  Buffer out = empty(SPMD_I64, {});
  spmd_rt_add_scalar(out.get(), self.get(), 3.0, 2.0);
  expectExact<int64_t>(out, {11});
}

TEST(RuntimeKernels, AddScalarIntTensorFloatScalar) {
  Buffer self = i64({2}, {1, 2});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_add_scalar(out.get(), self.get(), 0.5, 1.0);
  expectF32(out, {1.5f, 2.5f});
}

TEST(RuntimeKernels, MulScalar) {
  Buffer self = f32({2}, {1, -2});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_mul_scalar(out.get(), self.get(), 1.5);
  expectF32(out, {1.5f, -3});
  Buffer selfI = i32({2}, {1, -2});
  Buffer outI = empty(SPMD_I32, {2});
  spmd_rt_mul_scalar(outI.get(), selfI.get(), 3.0);
  expectExact<int32_t>(outI, {3, -6});
}

TEST(RuntimeKernels, DivScalarIntegerSelfGivesFloat) {
  Buffer self = i64({2}, {1, 3});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_div_scalar(out.get(), self.get(), 2.0);
  expectF32(out, {0.5f, 1.5f});
}

TEST(RuntimeKernels, RsubScalar) {
  Buffer self = f32({2}, {1, 2});
  Buffer out = empty(SPMD_F32, {2});
  spmd_rt_rsub_scalar(out.get(), self.get(), 10.0, 2.0);
  expectF32(out, {8, 6});
}

TEST(RuntimeKernels, PowScalar) {
  Buffer e = f32({5}, {0, 1, 3, -1, 0.5f});
  Buffer out = empty(SPMD_F32, {5});
  spmd_rt_pow_scalar(out.get(), 2.0, e.get());
  expectF32(out, {1, 2, 8, 0.5f, 1.41421356f});
  Buffer ei = i64({4}, {0, 1, 4, -1});
  Buffer outI = empty(SPMD_I64, {4});
  spmd_rt_pow_scalar(outI.get(), 3.0, ei.get());
  expectExact<int64_t>(outI, {1, 3, 81, 0});
}

TEST(RuntimeKernels, Neg) {
  Buffer self = f32({3}, {1, -2, 0});
  Buffer out = empty(SPMD_F32, {3});
  spmd_rt_neg(out.get(), self.get());
  expectF32(out, {-1, 2, 0});
  EXPECT_TRUE(std::signbit(values<float>(out)[2]));
  Buffer selfI = i64({1}, {5});
  Buffer outI = empty(SPMD_I64, {1});
  spmd_rt_neg(outI.get(), selfI.get());
  expectExact<int64_t>(outI, {-5});
}

TEST(RuntimeKernels, ReciprocalAndSqrt) {
  Buffer self = f32({3}, {2, 4, -0.5f});
  Buffer out = empty(SPMD_F32, {3});
  spmd_rt_reciprocal(out.get(), self.get());
  expectF32(out, {0.5f, 0.25f, -2});
  Buffer selfI = i64({1}, {4});
  Buffer outF = empty(SPMD_F32, {1});
  spmd_rt_reciprocal(outF.get(), selfI.get());
  expectF32(outF, {0.25f});
  Buffer sq = f32({3}, {4, 2.25f, 0});
  spmd_rt_sqrt(out.get(), sq.get());
  expectF32(out, {2, 1.5f, 0});
}

TEST(RuntimeKernels, Relu) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer self = f32({4}, {-1, 0, 2, nan});
  Buffer out = empty(SPMD_F32, {4});
  spmd_rt_relu(out.get(), self.get());
  expectF32(out, {0, 0, 2, nan});
  Buffer selfI = i64({2}, {-3, 4});
  Buffer outI = empty(SPMD_I64, {2});
  spmd_rt_relu(outI.get(), selfI.get());
  expectExact<int64_t>(outI, {0, 4});
}

TEST(RuntimeKernels, Abs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Buffer self = f32({5}, {-1.5f, 2, -0.0f, nan, -inf});
  Buffer out = empty(SPMD_F32, {5});
  spmd_rt_abs(out.get(), self.get());
  expectF32(out, {1.5f, 2, 0, nan, inf});
  EXPECT_FALSE(std::signbit(values<float>(out)[2])); // as fabs
  Buffer selfI = i32({3}, {-3, 0, 4});
  Buffer outI = empty(SPMD_I32, {3});
  spmd_rt_abs(outI.get(), selfI.get());
  expectExact<int32_t>(outI, {3, 0, 4});
}

TEST(RuntimeKernels, Maximum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [2, 1] against [3]: NaN on either side gives NaN.
  Buffer a = f32({2, 1}, {0, nan});
  Buffer b = f32({3}, {-1, 0.5f, nan});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_maximum(out.get(), a.get(), b.get());
  expectF32(out, {0, 0.5f, nan, nan, nan, nan});
  Buffer ai = i64({2}, {1, 5}), bi = i64({2}, {3, 2});
  Buffer outI = empty(SPMD_I64, {2});
  spmd_rt_maximum(outI.get(), ai.get(), bi.get());
  expectExact<int64_t>(outI, {3, 5});
  // Bools: or.
  Buffer p = i1({4}, {0, 1, 0, 1}), q = i1({4}, {0, 0, 1, 1});
  Buffer outB = empty(SPMD_I1, {4});
  spmd_rt_maximum(outB.get(), p.get(), q.get());
  expectExact<uint8_t>(outB, {0, 1, 1, 1});
  // An integer self in a promoted f32 result.
  Buffer half = f32({2}, {1.5f, 0.5f});
  Buffer outF = empty(SPMD_F32, {2});
  spmd_rt_maximum(outF.get(), ai.get(), half.get());
  expectF32(outF, {1.5f, 5});
}

TEST(RuntimeKernels, PowTensorScalar) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer x = f32({5}, {2, 0.25f, 9, -3, nan});
  Buffer out = empty(SPMD_F32, {5});
  auto pow = [&](double exponent) {
    spmd_rt_pow_tensor_scalar(out.get(), x.get(), exponent);
  };
  // ATen's special exponents: products, sqrt, rsqrt, reciprocal; 0 gives 1
  // even for NaN.
  pow(2);
  expectF32(out, {4, 0.0625f, 81, 9, nan});
  pow(3);
  expectF32(out, {8, 0.015625f, 729, -27, nan});
  pow(0.5);
  expectF32(out, {1.41421356f, 0.5f, 3, nan, nan});
  pow(-0.5);
  expectF32(out, {0.70710678f, 2, 1 / 3.0f, nan, nan});
  pow(-1);
  expectF32(out, {0.5f, 4, 1 / 9.0f, -1 / 3.0f, nan});
  pow(-2);
  expectF32(out, {0.25f, 16, 1 / 81.0f, 1 / 9.0f, nan});
  pow(0);
  expectF32(out, {1, 1, 1, 1, 1});
  pow(1);
  expectF32(out, {2, 0.25f, 9, -3, nan}, 0, 0);
  // Others: pow (a negative base to a fractional power is NaN).
  pow(1.5);
  expectF32(out, {2.82842712f, 0.125f, 27, nan, nan});
  // Integers: exact.
  Buffer xi = i64({4}, {2, -3, 0, 7});
  Buffer outI = empty(SPMD_I64, {4});
  spmd_rt_pow_tensor_scalar(outI.get(), xi.get(), 3);
  expectExact<int64_t>(outI, {8, -27, 0, 343});
  spmd_rt_pow_tensor_scalar(outI.get(), xi.get(), 0);
  expectExact<int64_t>(outI, {1, 1, 1, 1});
  // An integer self with a float exponent gives f32.
  Buffer sq = i64({2}, {4, 9});
  Buffer outF = empty(SPMD_F32, {2});
  spmd_rt_pow_tensor_scalar(outF.get(), sq.get(), 0.5);
  expectF32(outF, {2, 3});
}

TEST(RuntimeKernels, Clamp) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  Buffer x = f32({5}, {-2, -0.5f, 0.25f, 3, fnan});
  Buffer out = empty(SPMD_F32, {5});
  spmd_rt_clamp(out.get(), x.get(), -1, 1, 1, 1);
  expectF32(out, {-1, -0.5f, 0.25f, 1, fnan});
  // One bound (clamp_min, clamp_max); the other's value is ignored.
  spmd_rt_clamp(out.get(), x.get(), 0, 7, 1, 0);
  expectF32(out, {0, 0, 0.25f, 3, fnan});
  spmd_rt_clamp(out.get(), x.get(), 7, 1, 0, 1);
  expectF32(out, {-2, -0.5f, 0.25f, 1, fnan});
  // min > max: max everywhere but at NaN.
  spmd_rt_clamp(out.get(), x.get(), 2, 1, 1, 1);
  expectF32(out, {1, 1, 1, 1, fnan});
  // A NaN bound gives NaN (PyTorch 2.15), given alone or with the other.
  spmd_rt_clamp(out.get(), x.get(), nan, 1, 1, 1);
  expectF32(out, {fnan, fnan, fnan, fnan, fnan});
  spmd_rt_clamp(out.get(), x.get(), 0, nan, 0, 1);
  expectF32(out, {fnan, fnan, fnan, fnan, fnan});
  Buffer xi = i64({3}, {-5, 3, 9});
  Buffer outI = empty(SPMD_I64, {3});
  spmd_rt_clamp(outI.get(), xi.get(), 0, 5, 1, 1);
  expectExact<int64_t>(outI, {0, 3, 5});
  // An integer self with a float bound gives f32.
  Buffer outF = empty(SPMD_F32, {3});
  spmd_rt_clamp(outF.get(), xi.get(), 0, 2.5, 0, 1);
  expectF32(outF, {-5, 2.5f, 2.5f});
}

// Expected values: PyTorch 1.13 (torch.nn.functional.gelu, aten.gelu_backward).
const std::vector<float> kGeluX = {-3, -1.5f, -0.5f, 0, 0.25f, 1, 2.5f, 4};
const std::vector<float> kGeluDy = {1, -2, 0.5f, 3, 1.5f, -1, 2, 0.25f};

TEST(RuntimeKernels, GeluExactAndTanh) {
  Buffer x = f32({8}, kGeluX);
  Buffer out = empty(SPMD_F32, {8});
  spmd_rt_gelu(out.get(), x.get(), 0);
  expectF32(out, {-0.0040498674f, -0.10021086f, -0.15426879f, 0.0f, 0.14967656f,
                  0.84134471f, 2.4844759f, 3.9998732f});
  spmd_rt_gelu(out.get(), x.get(), 1);
  expectF32(out, {-0.0036374331f, -0.10042843f, -0.154286f, 0.0f, 0.14967535f,
                  0.84119201f, 2.4849157f, 3.9999299f});
}

TEST(RuntimeKernels, GeluBackwardExactAndTanh) {
  Buffer x = f32({8}, kGeluX);
  Buffer dy = f32({8}, kGeluDy);
  Buffer out = empty(SPMD_F32, {8});
  spmd_rt_gelu_backward(out.get(), dy.get(), x.get(), 0);
  expectF32(out, {-0.011945605f, 0.2549383f, 0.066252455f, 1.5f, 1.0430599f,
                  -1.0833154f, 2.075222f, 0.25012591f});
  spmd_rt_gelu_backward(out.get(), dy.get(), x.get(), 1);
  expectF32(out, {-0.011584297f, 0.25542164f, 0.066315055f, 1.5f, 1.0430312f,
                  -1.0829641f, 2.0759034f, 0.25008374f});
}

/// x = -10, -9.99, ..., 10 (2001 values: the vector loops and their tails).
std::vector<float> geluRange() {
  std::vector<float> x;
  for (int i = -1000; i <= 1000; ++i)
    x.push_back(static_cast<float>(i) / 100);
  return x;
}

TEST(RuntimeKernels, GeluMatchesDefinitionOverRange) {
  std::vector<float> x = geluRange();
  const int64_t n = static_cast<int64_t>(x.size());
  Buffer in = f32({n}, x);
  Buffer dy = empty(SPMD_F32, {n});
  spmd_rt_fill(dy.get(), 1.0);
  Buffer out = empty(SPMD_F32, {n});
  std::vector<float> exact, tanhApprox, exactGrad, tanhGrad;
  const double beta = std::sqrt(2 / M_PI), kappa = 0.044715;
  for (float f : x) {
    const double v = f;
    exact.push_back(static_cast<float>(0.5 * v * (1 + std::erf(v / M_SQRT2))));
    const double inner = beta * (v + kappa * v * v * v), t = std::tanh(inner);
    tanhApprox.push_back(static_cast<float>(0.5 * v * (1 + t)));
    exactGrad.push_back(
        static_cast<float>(0.5 * (1 + std::erf(v / M_SQRT2)) +
                           v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI)));
    tanhGrad.push_back(
        static_cast<float>(0.5 * (1 + t) + 0.5 * v * (1 - t * t) * beta *
                                               (1 + 3 * kappa * v * v)));
  }
  // ATen's float erf is accurate to 1.5e-7 absolute, hence atol.
  spmd_rt_gelu(out.get(), in.get(), 0);
  expectF32(out, exact, 1e-5, 2e-6);
  spmd_rt_gelu(out.get(), in.get(), 1);
  expectF32(out, tanhApprox, 1e-5, 2e-6);
  spmd_rt_gelu_backward(out.get(), dy.get(), in.get(), 0);
  expectF32(out, exactGrad, 1e-5, 2e-6);
  spmd_rt_gelu_backward(out.get(), dy.get(), in.get(), 1);
  expectF32(out, tanhGrad, 1e-5, 2e-6);
}

TEST(RuntimeKernels, GeluF64) {
  Buffer x = f64({3}, {-1, 0.5, 2});
  Buffer out = empty(SPMD_F64, {3});
  spmd_rt_gelu(out.get(), x.get(), 0);
  std::vector<double> expected;
  for (double v : {-1.0, 0.5, 2.0})
    expected.push_back(0.5 * v * (1 + std::erf(v / M_SQRT2)));
  expectNear<double>(out, expected, 1e-12, 1e-15);
}

// Expected values: PyTorch 2.15 (torch.nn.functional.silu,
// aten.silu_backward) on kGeluX and kGeluDy.
TEST(RuntimeKernels, Silu) {
  Buffer x = f32({8}, kGeluX);
  Buffer out = empty(SPMD_F32, {8});
  spmd_rt_silu(out.get(), x.get());
  expectF32(out, {-0.14227761f, -0.27363828f, -0.18877034f, 0.0f, 0.14054413f,
                  0.7310586f, 2.3103545f, 3.928055f});
}

TEST(RuntimeKernels, SiluBackward) {
  Buffer x = f32({8}, kGeluX);
  Buffer dy = f32({8}, kGeluDy);
  Buffer out = empty(SPMD_F32, {8});
  spmd_rt_silu_backward(out.get(), dy.get(), x.get());
  expectF32(out, {-0.088104106f, 0.082588322f, 0.13001941f, 1.5f, 0.93556505f,
                  -0.92767054f, 2.1988022f, 0.26316616f});
  // grad_output broadcast against self.
  Buffer dyOne = f32({1}, {2});
  spmd_rt_silu_backward(out.get(), dyOne.get(), x.get());
  std::vector<float> twice;
  for (float v : {-0.088104106f, -0.041294161f, 0.26003882f, 0.5f, 0.62371004f,
                  0.92767054f, 1.0994011f, 1.0526646f})
    twice.push_back(2 * v);
  expectF32(out, twice);
}

TEST(RuntimeKernels, SiluMatchesDefinitionOverRange) {
  std::vector<float> x = geluRange();
  // exp(-x) overflows to infinity: silu gives -0 and its derivative -0.
  for (float v : {-100.0f, -88.75f, -30.0f, 30.0f, 88.75f, 100.0f})
    x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  Buffer in = f32({n}, x);
  Buffer dy = empty(SPMD_F32, {n});
  spmd_rt_fill(dy.get(), 1.0);
  Buffer out = empty(SPMD_F32, {n});
  std::vector<float> silu, grad;
  for (float f : x) {
    const double v = f, s = 1 / (1 + std::exp(-v));
    silu.push_back(static_cast<float>(v * s));
    grad.push_back(static_cast<float>(s * (1 + v * (1 - s))));
  }
  spmd_rt_silu(out.get(), in.get());
  expectF32(out, silu, 1e-5, 1e-6);
  spmd_rt_silu_backward(out.get(), dy.get(), in.get());
  expectF32(out, grad, 1e-5, 1e-6);
}

TEST(RuntimeKernels, SiluF64) {
  const std::vector<double> xs = {-1, 0.5, 2}, dys = {1, -2, 0.5};
  Buffer x = f64({3}, xs);
  Buffer dy = f64({3}, dys);
  Buffer out = empty(SPMD_F64, {3});
  std::vector<double> expected, expectedGrad;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double s = 1 / (1 + std::exp(-xs[i]));
    expected.push_back(xs[i] * s);
    expectedGrad.push_back(dys[i] * s * (1 + xs[i] * (1 - s)));
  }
  spmd_rt_silu(out.get(), x.get());
  expectNear<double>(out, expected, 1e-12, 1e-15);
  spmd_rt_silu_backward(out.get(), dy.get(), x.get());
  expectNear<double>(out, expectedGrad, 1e-12, 1e-15);
}

TEST_F(RuntimeKernelsDeathTest, ElementwiseRejectsBadShapesAndDtypes) {
  Buffer a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer b = f32({2}, {1, 2});
  Buffer out = empty(SPMD_F32, {2, 3});
  EXPECT_DEATH(spmd_rt_add_tensor(out.get(), a.get(), b.get(), 1.0),
               "spmd_rt_add_tensor: cannot broadcast shape \\[2\\] to "
               "\\[2, 3\\]");
  Buffer half = empty(SPMD_F16, {2, 3});
  EXPECT_DEATH(spmd_rt_mul_tensor(half.get(), a.get(), a.get()),
               "spmd_rt_mul_tensor: unsupported dtype f16");
  Buffer mask = i1({2}, {0, 1});
  Buffer outMask = empty(SPMD_I1, {2});
  EXPECT_DEATH(spmd_rt_neg(outMask.get(), mask.get()),
               "spmd_rt_neg: unsupported dtype i1");
  Buffer outI = empty(SPMD_I64, {2, 3});
  EXPECT_DEATH(spmd_rt_div_tensor(outI.get(), a.get(), a.get()),
               "spmd_rt_div_tensor: unsupported dtype i64");
  Buffer big = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_DEATH(spmd_rt_relu(out.get(), big.get()),
               "spmd_rt_relu: cannot broadcast");
  EXPECT_DEATH(spmd_rt_clamp(out.get(), a.get(), 0, 1, 0, 0),
               "spmd_rt_clamp: neither min nor max is given");
  EXPECT_DEATH(spmd_rt_abs(outMask.get(), mask.get()),
               "spmd_rt_abs: unsupported dtype i1");
}

//===----------------------------------------------------------------------===//
// Copies, expand, permute, cat, slice, triu, factories
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, CopyConvertsDtypes) {
  Buffer self = f32({3}, {1.5f, -2.7f, 0});
  Buffer outI = empty(SPMD_I64, {3});
  spmd_rt_copy(outI.get(), self.get());
  expectExact<int64_t>(outI, {1, -2, 0});
  Buffer outB = empty(SPMD_I1, {3});
  spmd_rt_copy(outB.get(), self.get());
  expectExact<uint8_t>(outB, {1, 1, 0});
  Buffer back = empty(SPMD_F32, {3});
  spmd_rt_copy(back.get(), outB.get());
  expectF32(back, {1, 1, 0});
}

TEST(RuntimeKernels, CopyReshapes) {
  Buffer self = iota<int32_t>({2, 3});
  Buffer out = empty(SPMD_I32, {3, 1, 2});
  spmd_rt_copy(out.get(), self.get());
  expectExact<int32_t>(out, {0, 1, 2, 3, 4, 5});
}

TEST(RuntimeKernels, Expand) {
  Buffer row = f32({3}, {1, 2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_expand(out.get(), row.get());
  expectF32(out, {1, 2, 3, 1, 2, 3});
  Buffer col = i64({2, 1}, {7, 8});
  Buffer outI = empty(SPMD_I64, {2, 3});
  spmd_rt_expand(outI.get(), col.get());
  expectExact<int64_t>(outI, {7, 7, 7, 8, 8, 8});
  Buffer one = i1({1}, {1});
  Buffer outB = empty(SPMD_I1, {2, 2});
  spmd_rt_expand(outB.get(), one.get());
  expectExact<uint8_t>(outB, {1, 1, 1, 1});
}

TEST(RuntimeKernels, PermuteTranspose2D) {
  Buffer self = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer out = empty(SPMD_F32, {3, 2});
  const int64_t dims[] = {1, 0};
  spmd_rt_permute(out.get(), self.get(), 2, dims);
  expectF32(out, {1, 4, 2, 5, 3, 6});
}

/// out[idx] = self[idx permuted] checked against the definition.
template <typename T>
void checkPermute(const Shape &shape, const std::vector<int64_t> &dims) {
  const int32_t rank = static_cast<int32_t>(shape.size());
  Buffer self = iota<T>(shape);
  Shape outShape(rank);
  for (int32_t k = 0; k < rank; ++k)
    outShape[k] = shape[dims[k]];
  Buffer out = empty(dtypeOf<T>(), outShape);
  spmd_rt_permute(out.get(), self.get(), rank, dims.data());
  std::vector<int64_t> selfStrides(rank, 1);
  for (int32_t d = rank - 2; d >= 0; --d)
    selfStrides[d] = selfStrides[d + 1] * shape[d + 1];
  std::vector<T> expected;
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < out->numel; ++i) {
    int64_t source = 0;
    for (int32_t k = 0; k < rank; ++k)
      source += index[k] * selfStrides[dims[k]];
    expected.push_back(static_cast<T>(source));
    for (int32_t k = rank - 1; k >= 0; --k) {
      if (++index[k] < outShape[k])
        break;
      index[k] = 0;
    }
  }
  expectExact<T>(out, expected);
}

TEST(RuntimeKernels, PermuteNonContiguous) {
  checkPermute<float>({2, 3, 4}, {2, 0, 1});
  checkPermute<int64_t>({2, 3, 4, 5}, {0, 2, 1, 3}); // attention heads
  checkPermute<int32_t>({2, 3, 4, 5}, {3, 1, 0, 2});
  checkPermute<double>({4, 1, 3}, {1, 2, 0});
  // Larger than a tile in both dims (the blocked transpose).
  checkPermute<float>({70, 45}, {1, 0});
  checkPermute<float>({3, 40, 33}, {0, 2, 1});
}

TEST(RuntimeKernels, PermuteI1) {
  Buffer self = i1({2, 2}, {1, 0, 0, 0});
  Buffer out = empty(SPMD_I1, {2, 2});
  const int64_t dims[] = {1, 0};
  spmd_rt_permute(out.get(), self.get(), 2, dims);
  expectExact<uint8_t>(out, {1, 0, 0, 0});
  Buffer self2 = i1({2, 2}, {0, 1, 0, 0});
  spmd_rt_permute(out.get(), self2.get(), 2, dims);
  expectExact<uint8_t>(out, {0, 0, 1, 0});
}

TEST(RuntimeKernels, CatOuterAndInnerDims) {
  Buffer a = f32({1, 2}, {1, 2});
  Buffer b = f32({2, 2}, {3, 4, 5, 6});
  Buffer out = empty(SPMD_F32, {3, 2});
  const SpmdBuffer *ins[] = {a.get(), b.get()};
  spmd_rt_cat(out.get(), 2, ins, 0);
  expectF32(out, {1, 2, 3, 4, 5, 6});

  Buffer c = f32({2, 1, 2}, {1, 2, 3, 4});
  Buffer d = f32({2, 2, 2}, {10, 11, 12, 13, 14, 15, 16, 17});
  Buffer out3 = empty(SPMD_F32, {2, 3, 2});
  const SpmdBuffer *ins3[] = {c.get(), d.get()};
  spmd_rt_cat(out3.get(), 2, ins3, 1);
  expectF32(out3, {1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17});

  // Last dim, three i64 inputs, one of them i32 (converted).
  Buffer e = i64({2, 1}, {1, 2});
  Buffer f = i32({2, 2}, {10, 11, 12, 13});
  Buffer g = i64({2, 1}, {7, 8});
  Buffer outI = empty(SPMD_I64, {2, 4});
  const SpmdBuffer *insI[] = {e.get(), f.get(), g.get()};
  spmd_rt_cat(outI.get(), 3, insI, 1);
  expectExact<int64_t>(outI, {1, 10, 11, 7, 2, 12, 13, 8});
}

TEST(RuntimeKernels, CatI1) {
  Buffer a = i1({1}, {1});
  Buffer b = i1({2}, {0, 1});
  Buffer out = empty(SPMD_I1, {3});
  const SpmdBuffer *ins[] = {a.get(), b.get()};
  spmd_rt_cat(out.get(), 2, ins, 0);
  expectExact<uint8_t>(out, {1, 0, 1});
}

TEST(RuntimeKernels, SliceAlongDims) {
  Buffer self = iota<float>({2, 4});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_slice(out.get(), self.get(), 1, 1, 1);
  expectF32(out, {1, 2, 5, 6});
  Buffer row = empty(SPMD_F32, {1, 4});
  spmd_rt_slice(row.get(), self.get(), 0, 1, 1);
  expectF32(row, {4, 5, 6, 7});
  Buffer self3 = iota<int64_t>({2, 3, 2});
  Buffer out3 = empty(SPMD_I64, {2, 1, 2});
  spmd_rt_slice(out3.get(), self3.get(), 1, 2, 1);
  expectExact<int64_t>(out3, {4, 5, 10, 11});
  Buffer last = empty(SPMD_I64, {2, 3, 1});
  spmd_rt_slice(last.get(), self3.get(), 2, 1, 1);
  expectExact<int64_t>(last, {1, 3, 5, 7, 9, 11});
}

TEST(RuntimeKernels, SliceWithStepAndScatter) {
  Buffer self = iota<float>({2, 5});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_slice(out.get(), self.get(), 1, 1, 3); // self[:, 1:5:3]
  expectF32(out, {1, 4, 6, 9});
  Buffer src = f32({2, 2}, {-1, -2, -3, -4});
  Buffer scattered = empty(SPMD_F32, {2, 5});
  spmd_rt_slice_scatter(scattered.get(), self.get(), src.get(), 1, 0, 2);
  expectF32(scattered, {-1, 1, -2, 3, 4, -3, 6, -4, 8, 9});
  Buffer rows = f32({1, 5}, {9, 9, 9, 9, 9});
  spmd_rt_slice_scatter(scattered.get(), self.get(), rows.get(), 0, 1, 1);
  expectF32(scattered, {0, 1, 2, 3, 4, 9, 9, 9, 9, 9});
}

TEST(RuntimeKernels, ConstantPadNd) {
  // F.pad(labels, (0, 1), value=-100): the causal LM's label shift.
  Buffer labels = i64({2, 2}, {1, 2, 3, 4});
  Buffer padded = empty(SPMD_I64, {2, 3});
  const int64_t shift[] = {0, 1};
  spmd_rt_constant_pad_nd(padded.get(), labels.get(), 2, shift, -100);
  expectExact<int64_t>(padded, {1, 2, -100, 3, 4, -100});
  // Two dims, and a negative amount that crops.
  Buffer self = iota<float>({2, 3});
  Buffer out = empty(SPMD_F32, {3, 3});
  const int64_t pad[] = {-1, 1, 1, 0};
  spmd_rt_constant_pad_nd(out.get(), self.get(), 4, pad, 0.5);
  expectF32(out, {0.5, 0.5, 0.5, 1, 2, 0.5, 4, 5, 0.5});
}

TEST(RuntimeKernels, Hardtanh) {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  Buffer x = f32({5}, {-2, 0.5f, 6.5f, 3, fnan});
  Buffer out = empty(SPMD_F32, {5});
  spmd_rt_hardtanh(out.get(), x.get(), 0, 6);
  expectF32(out, {0, 0.5f, 6, 3, fnan});
}

/// A 2-D convolution with stride, padding, dilation and groups against
/// direct summation.
TEST(RuntimeKernels, Convolution) {
  // input [1, 2, 3, 3], weight [2, 1, 2, 2] (groups 2), stride 1, pad 1,
  // dilation 2: out [1, 2, 3, 3].
  Buffer input = iota<float>({1, 2, 3, 3});
  const std::vector<float> w = {1, 2, 3, 4, -1, 0.5f, 2, 1};
  Buffer weight = f32({2, 1, 2, 2}, w);
  Buffer bias = f32({2}, {0.5f, -1});
  Buffer out = empty(SPMD_F32, {1, 2, 3, 3});
  const int64_t one[] = {1, 1}, pad[] = {1, 1}, dil[] = {2, 2};
  spmd_rt_convolution(out.get(), input.get(), weight.get(), bias.get(), 2, one,
                      2, pad, 2, dil, 2);
  std::vector<float> expected;
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        float sum = c == 0 ? 0.5f : -1;
        for (int kh = 0; kh < 2; ++kh)
          for (int kw = 0; kw < 2; ++kw) {
            int ih = oh - 1 + 2 * kh, iw = ow - 1 + 2 * kw;
            if (ih >= 0 && ih < 3 && iw >= 0 && iw < 3)
              sum += w[c * 4 + kh * 2 + kw] * float(c * 9 + ih * 3 + iw);
          }
        expected.push_back(sum);
      }
  expectF32(out, expected);
}

/// The backward of a 1-D, stride-2 convolution: the weight gradient sums
/// over the batch, the input gradient folds the taps back.
TEST(RuntimeKernels, ConvolutionBackward) {
  // input [2, 1, 5], weight [1, 1, 3], stride 2: out [2, 1, 2].
  Buffer input = f32({2, 1, 5}, {1, 2, 3, 4, 5, -1, 0, 1, 0, 2});
  Buffer weight = f32({1, 1, 3}, {1, -2, 0.5f});
  Buffer grad = f32({2, 1, 2}, {1, 2, -1, 3});
  Buffer gi = empty(SPMD_F32, {2, 1, 5}), gw = empty(SPMD_F32, {1, 1, 3});
  const int64_t stride[] = {2}, pad[] = {0}, dil[] = {1};
  spmd_rt_convolution_backward(gi.get(), gw.get(), grad.get(), input.get(),
                               weight.get(), 1, stride, 1, pad, 1, dil, 1);
  // gw[k] = sum_n sum_p grad[n, p] * input[n, 2p + k].
  expectF32(gw, {1 * 1 + 2 * 3 + -1 * -1 + 3 * 1, 1 * 2 + 2 * 4 + 3 * 0,
                 1 * 3 + 2 * 5 + -1 * 1 + 3 * 2});
  expectF32(gi, {1, -2, 0.5f + 2, -4, 1, -1, 2, -0.5f + 3, -6, 1.5f});
  // A NULL gradient is not computed (output_mask); the other is unchanged.
  Buffer onlyGw = empty(SPMD_F32, {1, 1, 3}),
         onlyGi = empty(SPMD_F32, {2, 1, 5});
  spmd_rt_convolution_backward(nullptr, onlyGw.get(), grad.get(), input.get(),
                               weight.get(), 1, stride, 1, pad, 1, dil, 1);
  spmd_rt_convolution_backward(onlyGi.get(), nullptr, grad.get(), input.get(),
                               weight.get(), 1, stride, 1, pad, 1, dil, 1);
  expectF32(onlyGw, {1 * 1 + 2 * 3 + -1 * -1 + 3 * 1, 1 * 2 + 2 * 4 + 3 * 0,
                     1 * 3 + 2 * 5 + -1 * 1 + 3 * 2});
  expectF32(onlyGi, {1, -2, 0.5f + 2, -4, 1, -1, 2, -0.5f + 3, -6, 1.5f});
}

/// A depthwise convolution (summed tap by tap) equals the dense one
/// (im2col and GEMM) whose weight is block-diagonal, forward and backward:
/// stride, asymmetric padding and dilation, two images.
TEST(RuntimeKernels, DepthwiseConvolutionAgainstDense) {
  const int64_t c = 3, k = 3;
  Buffer input = iota<float>({2, c, 5, 6});
  std::vector<float> w(c * k * k), dense(c * c * k * k, 0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < k * k; ++t) {
      w[ch * k * k + t] = 0.25f * float((ch + 1) * (t % 4) - t / 3);
      dense[(ch * c + ch) * k * k + t] = w[ch * k * k + t];
    }
  Buffer dw = f32({c, 1, k, k}, w), dd = f32({c, c, k, k}, dense);
  Buffer bias = f32({c}, {0.5f, -1, 2});
  const int64_t stride[] = {1, 2}, pad[] = {1, 2}, dil[] = {1, 2};
  Buffer outDw = empty(SPMD_F32, {2, c, 5, 3}),
         outDd = empty(SPMD_F32, {2, c, 5, 3});
  spmd_rt_convolution(outDw.get(), input.get(), dw.get(), bias.get(), 2, stride,
                      2, pad, 2, dil, c);
  spmd_rt_convolution(outDd.get(), input.get(), dd.get(), bias.get(), 2, stride,
                      2, pad, 2, dil, 1);
  expectF32(outDw, values<float>(outDd));

  Buffer grad = iota<float>({2, c, 5, 3});
  Buffer giDw = empty(SPMD_F32, {2, c, 5, 6}),
         giDd = empty(SPMD_F32, {2, c, 5, 6});
  Buffer gwDw = empty(SPMD_F32, {c, 1, k, k}),
         gwDd = empty(SPMD_F32, {c, c, k, k});
  spmd_rt_convolution_backward(giDw.get(), gwDw.get(), grad.get(), input.get(),
                               dw.get(), 2, stride, 2, pad, 2, dil, c);
  spmd_rt_convolution_backward(giDd.get(), gwDd.get(), grad.get(), input.get(),
                               dd.get(), 2, stride, 2, pad, 2, dil, 1);
  expectF32(giDw, values<float>(giDd));
  // The depthwise weight gradient is the dense one's diagonal blocks.
  const std::vector<float> gd = values<float>(gwDd);
  std::vector<float> wantGw;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < k * k; ++t)
      wantGw.push_back(gd[(ch * c + ch) * k * k + t]);
  expectF32(gwDw, wantGw);
}

TEST(RuntimeKernels, MaxPool2dWithIndices) {
  // [1, 3, 3], kernel 2, stride 1, padding 1: windows reach into the
  // padding, which is never picked; ceil_mode keeps a last partial window.
  Buffer self = f32({1, 3, 3}, {1, 5, 2, 7, 3, 4, 0, 9, 6});
  Buffer out = empty(SPMD_F32, {1, 4, 4});
  Buffer idx = empty(SPMD_I64, {1, 4, 4});
  const int64_t k[] = {2, 2}, s[] = {1, 1}, p[] = {1, 1}, d[] = {1, 1};
  spmd_rt_max_pool2d_with_indices(out.get(), idx.get(), self.get(), 2, k, 2, s,
                                  2, p, 2, d, 0);
  expectF32(out, {1, 5, 5, 2, 7, 7, 5, 4, 7, 9, 9, 6, 0, 9, 9, 6});
  expectExact<int64_t>(idx, {0, 1, 1, 2, 3, 3, 1, 5, 3, 7, 7, 8, 6, 7, 7, 8});
  Buffer grad =
      f32({1, 4, 4}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  Buffer dx = empty(SPMD_F32, {1, 3, 3});
  spmd_rt_max_pool2d_with_indices_backward(dx.get(), grad.get(), idx.get());
  expectF32(dx, {1, 3, 1, 3, 0, 1, 1, 4, 2});
}

TEST(RuntimeKernels, Cumsum) {
  Buffer self = i1({2, 3}, {1, 0, 1, 0, 1, 1});
  Buffer out = empty(SPMD_I64, {2, 3});
  spmd_rt_cumsum(out.get(), self.get(), 1);
  expectExact<int64_t>(out, {1, 1, 2, 0, 1, 2});
  Buffer f = f32({2, 2}, {1.5, 2, -1, 4});
  Buffer cols = empty(SPMD_F32, {2, 2});
  spmd_rt_cumsum(cols.get(), f.get(), 0);
  expectF32(cols, {1.5, 2, 0.5, 6});
}

TEST(RuntimeKernels, Gather) {
  Buffer self = iota<float>({2, 3});
  Buffer index = i64({2, 2}, {2, 0, -1, 1});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_gather(out.get(), self.get(), 1, index.get());
  expectF32(out, {2, 0, 5, 4});
  Buffer rows = i64({1, 3}, {1, 0, 1});
  Buffer picked = empty(SPMD_F32, {1, 3});
  spmd_rt_gather(picked.get(), self.get(), 0, rows.get());
  expectF32(picked, {3, 1, 5});
}

TEST(RuntimeKernels, DivRoundingModes) {
  // Python's // and C's / on integers of both signs; a zero divisor gives 0.
  Buffer a = i64({5}, {7, -7, 7, -7, 3});
  Buffer b = i64({5}, {2, 2, -2, -2, 0});
  Buffer out = empty(SPMD_I64, {5});
  spmd_rt_div_tensor_mode(out.get(), a.get(), b.get(), 1);
  expectExact<int64_t>(out, {3, -4, -4, 3, 0});
  spmd_rt_div_tensor_mode(out.get(), a.get(), b.get(), 0);
  expectExact<int64_t>(out, {3, -3, -3, 3, 0});
  // Floats: floor of -0.5 is -1, a zero quotient keeps its sign.
  Buffer x = f32({4}, {-1, 5.5f, -0.5f, 0.25f});
  Buffer y = f32({4}, {2, -2, 1, -1});
  Buffer q = empty(SPMD_F32, {4});
  spmd_rt_div_tensor_mode(q.get(), x.get(), y.get(), 1);
  expectF32(q, {-1, -3, -1, -1});
  spmd_rt_div_tensor_mode(q.get(), x.get(), y.get(), 0);
  std::vector<float> t = values<float>(q);
  EXPECT_EQ(t[0], -0.0f);
  EXPECT_TRUE(std::signbit(t[0]));
  EXPECT_EQ(t[1], -2);
  EXPECT_TRUE(std::signbit(t[2]));
  EXPECT_TRUE(std::signbit(t[3]));
}

TEST(RuntimeKernels, ScatterAndScatterAdd) {
  // Along dim 1 of a [2, 3]: row 0 writes columns 2 and 0, row 1 writes
  // column 1 twice (the last write wins; scatter_add sums both).
  Buffer self = iota<float>({2, 3});
  Buffer index = i64({2, 2}, {2, 0, 1, -2});
  Buffer src = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_scatter(out.get(), self.get(), 1, index.get(), src.get(), 0);
  expectF32(out, {20, 1, 10, 3, 50, 5});
  spmd_rt_scatter(out.get(), self.get(), 1, index.get(), src.get(), 1);
  expectF32(out, {20, 1, 12, 3, 94, 5});
  // Along dim 0, an index smaller than src.
  Buffer rows = i64({1, 2}, {1, 0});
  spmd_rt_scatter(out.get(), self.get(), 0, rows.get(), src.get(), 0);
  expectF32(out, {0, 20, 2, 10, 4, 5});
  // Booleans add as a logical or: true stays 1 (ATen's bool `+=`).
  Buffer mask = i1({2, 3}, {1, 0, 1, 0, 1, 0});
  Buffer on = i1({2, 3}, {1, 1, 1, 1, 1, 1});
  Buffer outMask = empty(SPMD_I1, {2, 3});
  spmd_rt_scatter(outMask.get(), mask.get(), 1, index.get(), on.get(), 1);
  expectExact<uint8_t>(outMask, {1, 0, 1, 0, 1, 0});
}

TEST(RuntimeKernels, Topk) {
  // Largest 2 of each row, ties by position, NaN above every number.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer self = f32({2, 4}, {1, 3, 3, 2, -1, nan, 5, 0});
  Buffer best = empty(SPMD_F32, {2, 2});
  Buffer at = empty(SPMD_I64, {2, 2});
  spmd_rt_topk(best.get(), at.get(), self.get(), 2, 1, 1);
  expectExact<int64_t>(at, {1, 2, 1, 2});
  std::vector<float> top = values<float>(best);
  EXPECT_EQ(top[0], 3);
  EXPECT_EQ(top[1], 3);
  EXPECT_TRUE(std::isnan(top[2]));
  EXPECT_EQ(top[3], 5);
  // Smallest 3 down dim 0 of a [3, 2] of integers.
  Buffer ints = i64({3, 2}, {4, -1, 2, 7, 9, -1});
  Buffer least = empty(SPMD_I64, {3, 2});
  Buffer where = empty(SPMD_I64, {3, 2});
  spmd_rt_topk(least.get(), where.get(), ints.get(), 3, 0, 0);
  expectExact<int64_t>(least, {2, -1, 4, -1, 9, 7});
  expectExact<int64_t>(where, {1, 0, 0, 2, 2, 1});
}

TEST(RuntimeKernels, SortIsStable) {
  // Along dim 1, ties keep their order ascending and descending.
  Buffer self = f32({2, 4}, {2, 1, 2, 1, 0, 3, 3, -1});
  Buffer sorted = empty(SPMD_F32, {2, 4});
  Buffer at = empty(SPMD_I64, {2, 4});
  spmd_rt_sort(sorted.get(), at.get(), self.get(), 1, 0);
  expectF32(sorted, {1, 1, 2, 2, -1, 0, 3, 3});
  expectExact<int64_t>(at, {1, 3, 0, 2, 3, 0, 1, 2});
  spmd_rt_sort(sorted.get(), at.get(), self.get(), 1, 1);
  expectF32(sorted, {2, 2, 1, 1, 3, 3, 0, -1});
  expectExact<int64_t>(at, {0, 2, 1, 3, 1, 2, 0, 3});
}

TEST_F(RuntimeKernelsDeathTest, ScatterAndTopkRejectBadOperands) {
  Buffer self = iota<float>({2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  Buffer far = i64({1, 1}, {3});
  EXPECT_DEATH(
      spmd_rt_scatter(out.get(), self.get(), 1, far.get(), self.get(), 0),
      "spmd_rt_scatter: index 3 is out of bounds for dim 1 of size 3");
  Buffer wide = i64({1, 4}, {0, 0, 0, 0});
  EXPECT_DEATH(
      spmd_rt_scatter(out.get(), self.get(), 0, wide.get(), self.get(), 1),
      "spmd_rt_scatter_add: index \\[1, 4\\] does not fit src");
  Buffer best = empty(SPMD_F32, {2, 4});
  Buffer at = empty(SPMD_I64, {2, 4});
  EXPECT_DEATH(spmd_rt_topk(best.get(), at.get(), self.get(), 4, 1, 1),
               "spmd_rt_topk: k 4 is not in \\[0, 3\\]");
}

TEST(RuntimeKernels, IndexBroadcastIndices) {
  // mask[batch[:, None], position[None, :]] of a [2, 3] mask.
  Buffer mask = i1({2, 3}, {1, 0, 1, 0, 1, 1});
  Buffer batch = i64({2, 1}, {1, 0});
  Buffer position = i64({1, 2}, {2, -3});
  Buffer out = empty(SPMD_I1, {2, 2});
  const SpmdBuffer *indices[] = {batch.get(), position.get()};
  spmd_rt_index(out.get(), mask.get(), 2, indices);
  expectExact<uint8_t>(out, {1, 0, 1, 1});
  // Rows of a matrix: the trailing dim is copied whole.
  Buffer self = iota<int32_t>({3, 2});
  Buffer rows = i32({2}, {2, 0});
  Buffer picked = empty(SPMD_I32, {2, 2});
  const SpmdBuffer *one[] = {rows.get()};
  spmd_rt_index(picked.get(), self.get(), 1, one);
  expectExact<int32_t>(picked, {4, 5, 0, 1});
}

TEST(RuntimeKernels, Triu) {
  Buffer self = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Buffer out = empty(SPMD_F32, {3, 3});
  spmd_rt_triu(out.get(), self.get(), 0);
  expectF32(out, {1, 2, 3, 0, 5, 6, 0, 0, 9});
  spmd_rt_triu(out.get(), self.get(), 1);
  expectF32(out, {0, 2, 3, 0, 0, 6, 0, 0, 0});
  spmd_rt_triu(out.get(), self.get(), -1);
  expectF32(out, {1, 2, 3, 4, 5, 6, 0, 8, 9});
  spmd_rt_triu(out.get(), self.get(), 5);
  expectF32(out, std::vector<float>(9, 0));
  Buffer batched = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Buffer outB = empty(SPMD_F32, {2, 2, 3});
  spmd_rt_triu(outB.get(), batched.get(), 0);
  expectF32(outB, {1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12});
}

TEST(RuntimeKernels, FillAndArange) {
  Buffer f = empty(SPMD_F32, {2, 2});
  spmd_rt_fill(f.get(), 2.5);
  expectF32(f, {2.5f, 2.5f, 2.5f, 2.5f});
  Buffer i = empty(SPMD_I64, {3});
  spmd_rt_fill(i.get(), 7.0);
  expectExact<int64_t>(i, {7, 7, 7});
  Buffer j = empty(SPMD_I32, {1});
  spmd_rt_fill(j.get(), -3.0);
  expectExact<int32_t>(j, {-3});
  Buffer b = empty(SPMD_I1, {2});
  spmd_rt_fill(b.get(), 1.0);
  expectExact<uint8_t>(b, {1, 1});
  Buffer d = empty(SPMD_F64, {1});
  spmd_rt_fill(d.get(), 0.1);
  expectExact<double>(d, {0.1});

  Buffer a = empty(SPMD_F32, {5});
  spmd_rt_arange(a.get(), 0, 1);
  expectF32(a, {0, 1, 2, 3, 4});
  Buffer ai = empty(SPMD_I64, {4});
  spmd_rt_arange(ai.get(), 0, 1);
  expectExact<int64_t>(ai, {0, 1, 2, 3});
  // arange.start_step: start + i * step, then converted (truncated for
  // integers).
  Buffer steps = empty(SPMD_F32, {4});
  spmd_rt_arange(steps.get(), 1, 0.5);
  expectF32(steps, {1, 1.5, 2, 2.5});
  Buffer down = empty(SPMD_I64, {3});
  spmd_rt_arange(down.get(), 5, -2);
  expectExact<int64_t>(down, {5, 3, 1});
}

TEST(RuntimeKernels, SelectIsASliceWithoutTheDim) {
  Buffer self = iota<float>({2, 3, 4}); // self[i][j][k] = 12i + 4j + k
  Buffer row = empty(SPMD_F32, {2, 4});
  spmd_rt_slice(row.get(), self.get(), 1, 2, 1);
  expectF32(row, {8, 9, 10, 11, 20, 21, 22, 23});
  Buffer last = empty(SPMD_F32, {2, 3});
  spmd_rt_slice(last.get(), self.get(), 2, 3, 1);
  expectF32(last, {3, 7, 11, 15, 19, 23});
}

TEST(RuntimeKernels, TruthValuesWhereAndLerp) {
  Buffer x = f32({4}, {0, 1.5, -2, 1.5});
  Buffer eq = empty(SPMD_I1, {4});
  spmd_rt_eq_scalar(eq.get(), x.get(), 1.5);
  expectExact<uint8_t>(eq, {0, 1, 0, 1});
  Buffer notX = empty(SPMD_I1, {4});
  spmd_rt_logical_not(notX.get(), x.get());
  expectExact<uint8_t>(notX, {1, 0, 0, 0});
  // Integers against a fractional scalar compare in f64 (ATen's promotion).
  Buffer ints = i64({3}, {0, 1, 2});
  Buffer half = empty(SPMD_I1, {3});
  spmd_rt_eq_scalar(half.get(), ints.get(), 1.5);
  expectExact<uint8_t>(half, {0, 0, 0});
  spmd_rt_eq_scalar(half.get(), ints.get(), 1);
  expectExact<uint8_t>(half, {0, 1, 0});

  // where broadcasts the condition [4] against [2, 1] and [2, 4].
  Buffer a = f32({2, 1}, {10, 20});
  Buffer b = iota<float>({2, 4});
  Buffer out = empty(SPMD_F32, {2, 4});
  spmd_rt_where_self(out.get(), eq.get(), a.get(), b.get());
  expectF32(out, {0, 10, 2, 10, 4, 20, 6, 20});

  // lerp from both ends: exact at weight 0 and 1.
  Buffer start = f32({3}, {1, -2, 1e8});
  Buffer end = f32({3}, {3, 2, 1});
  Buffer l = empty(SPMD_F32, {3});
  spmd_rt_lerp_scalar(l.get(), start.get(), end.get(), 0.25);
  expectF32(l, {1.5, -1, 0.75e8 + 0.25f});
  spmd_rt_lerp_scalar(l.get(), start.get(), end.get(), 1);
  expectExact<float>(l, {3, 2, 1});
}

TEST(RuntimeKernels, AnyOverDims) {
  Buffer m = i1({2, 3}, {0, 1, 0, 0, 0, 0});
  const int64_t dim1[] = {1}, dim0[] = {0};
  Buffer rows = empty(SPMD_I1, {2});
  spmd_rt_any(rows.get(), m.get(), 1, dim1);
  expectExact<uint8_t>(rows, {1, 0});
  Buffer cols = empty(SPMD_I1, {1, 3});
  spmd_rt_any(cols.get(), m.get(), 1, dim0);
  expectExact<uint8_t>(cols, {0, 1, 0});
  Buffer none = empty(SPMD_I1, {0, 2});
  Buffer empty2 = empty(SPMD_I1, {2});
  spmd_rt_any(empty2.get(), none.get(), 1, dim0);
  expectExact<uint8_t>(empty2, {0, 0});
}

TEST_F(RuntimeKernelsDeathTest, ShapeKernelsRejectMismatches) {
  Buffer a = f32({2, 2}, {1, 2, 3, 4});
  Buffer b = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer out = empty(SPMD_F32, {4, 2});
  const SpmdBuffer *ins[] = {a.get(), b.get()};
  EXPECT_DEATH(spmd_rt_cat(out.get(), 2, ins, 0),
               "spmd_rt_cat: input 1 of shape \\[2, 3\\] does not fit");
  Buffer out2 = empty(SPMD_F32, {5, 2});
  const SpmdBuffer *ins2[] = {a.get(), a.get()};
  EXPECT_DEATH(spmd_rt_cat(out2.get(), 2, ins2, 0),
               "spmd_rt_cat: inputs sum to 4");
  Buffer slice = empty(SPMD_F32, {2, 2});
  EXPECT_DEATH(spmd_rt_slice(slice.get(), b.get(), 1, 2, 1),
               "spmd_rt_slice: out \\[2, 2\\] is not a slice");
  Buffer copy = empty(SPMD_F32, {5});
  EXPECT_DEATH(spmd_rt_copy(copy.get(), a.get()),
               "spmd_rt_copy: .* different numbers of elements");
  const int64_t dims[] = {0, 0};
  Buffer perm = empty(SPMD_F32, {2, 2});
  EXPECT_DEATH(spmd_rt_permute(perm.get(), a.get(), 2, dims),
               "spmd_rt_permute: dims is not a permutation");
  Buffer half = empty(SPMD_F16, {2});
  EXPECT_DEATH(spmd_rt_fill(half.get(), 1.0),
               "spmd_rt_fill: unsupported dtype f16");
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

const std::vector<float> kA = {1, 2, 3, 4, 5, 6};    // [2, 3]
const std::vector<float> kB = {7, 8, 9, 10, 11, 12}; // [3, 2]
// kA @ kB = [[58, 64], [139, 154]]

TEST(RuntimeKernels, Mm) {
  Buffer a = f32({2, 3}, kA);
  Buffer b = f32({3, 2}, kB);
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_mm(out.get(), a.get(), b.get());
  expectF32(out, {58, 64, 139, 154});
  Buffer ad = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  Buffer bd = f64({3, 2}, {7, 8, 9, 10, 11, 12});
  Buffer outD = empty(SPMD_F64, {2, 2});
  spmd_rt_mm(outD.get(), ad.get(), bd.get());
  expectNear<double>(outD, {58, 64, 139, 154});
}

TEST(RuntimeKernels, AddmmBetaAlphaAndBiasBroadcast) {
  Buffer a = f32({2, 3}, kA);
  Buffer b = f32({3, 2}, kB);
  Buffer bias = f32({2}, {1, -1});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_addmm(out.get(), bias.get(), a.get(), b.get(), 0.5, 2.0);
  expectF32(out, {116.5f, 127.5f, 278.5f, 307.5f});
  Buffer col = f32({2, 1}, {1, 2});
  spmd_rt_addmm(out.get(), col.get(), a.get(), b.get(), 1.0, 1.0);
  expectF32(out, {59, 65, 141, 156});
  Buffer full = f32({2, 2}, {1, 2, 3, 4});
  spmd_rt_addmm(out.get(), full.get(), a.get(), b.get(), -1.0, 1.0);
  expectF32(out, {57, 62, 136, 150});
}

TEST(RuntimeKernels, AddmmBetaZeroIgnoresNaNSelf) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer a = f32({2, 3}, kA);
  Buffer b = f32({3, 2}, kB);
  Buffer self = f32({2, 2}, {nan, nan, nan, nan});
  Buffer out = empty(SPMD_F32, {2, 2});
  spmd_rt_fill(out.get(), nan);
  spmd_rt_addmm(out.get(), self.get(), a.get(), b.get(), 0.0, 1.0);
  expectF32(out, {58, 64, 139, 154});
}

TEST(RuntimeKernels, MmEmptyInnerDim) {
  Buffer a = empty(SPMD_F32, {2, 0});
  Buffer b = empty(SPMD_F32, {0, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_fill(out.get(), std::numeric_limits<double>::quiet_NaN());
  spmd_rt_mm(out.get(), a.get(), b.get());
  expectF32(out, std::vector<float>(6, 0));
}

TEST(RuntimeKernels, BmmAndBaddbmm) {
  std::vector<float> a = kA, b = kB;
  std::vector<float> a1 = {1, 0, 0, 0, 1, 0}, b1 = {1, 2, 3, 4, 5, 6};
  a.insert(a.end(), a1.begin(), a1.end());
  b.insert(b.end(), b1.begin(), b1.end());
  Buffer ba = f32({2, 2, 3}, a);
  Buffer bb = f32({2, 3, 2}, b);
  Buffer out = empty(SPMD_F32, {2, 2, 2});
  spmd_rt_bmm(out.get(), ba.get(), bb.get());
  expectF32(out, {58, 64, 139, 154, 1, 2, 3, 4});
  Buffer self = f32({2, 2}, {1, 1, 1, 1}); // broadcast over the batch
  spmd_rt_baddbmm(out.get(), self.get(), ba.get(), bb.get(), 2.0, 0.5);
  expectF32(out, {31, 34, 71.5f, 79, 2.5f, 3, 3.5f, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer nanSelf = f32({1}, {nan});
  spmd_rt_baddbmm(out.get(), nanSelf.get(), ba.get(), bb.get(), 0.0, 1.0);
  expectF32(out, {58, 64, 139, 154, 1, 2, 3, 4});
}

TEST_F(RuntimeKernelsDeathTest, MatmulRejectsMismatchedDims) {
  Buffer a = f32({2, 3}, kA);
  Buffer b = f32({2, 3}, kA);
  Buffer out = empty(SPMD_F32, {2, 3});
  EXPECT_DEATH(spmd_rt_mm(out.get(), a.get(), b.get()),
               "spmd_rt_mm: cannot multiply \\[2, 3\\] by \\[2, 3\\]");
  Buffer c = f32({3, 2}, kB);
  Buffer bias = f32({3}, {1, 2, 3});
  Buffer out2 = empty(SPMD_F32, {2, 2});
  EXPECT_DEATH(
      spmd_rt_addmm(out2.get(), bias.get(), a.get(), c.get(), 1.0, 1.0),
      "spmd_rt_addmm: cannot broadcast");
  Buffer outI = empty(SPMD_I64, {2, 2});
  EXPECT_DEATH(spmd_rt_mm(outI.get(), a.get(), c.get()),
               "spmd_rt_mm: unsupported dtype i64");
}

//===----------------------------------------------------------------------===//
// Sum
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, SumAll) {
  Buffer self = iota<float>({2, 3, 4});
  Buffer out = empty(SPMD_F32, {});
  spmd_rt_sum(out.get(), self.get(), 0, nullptr);
  expectF32(out, {276});
  Buffer outD = empty(SPMD_F64, {});
  spmd_rt_sum(outD.get(), self.get(), 0, nullptr);
  expectNear<double>(outD, {276});
}

TEST(RuntimeKernels, SumOverDimsWithAndWithoutKeepdim) {
  Buffer self = iota<float>({2, 3, 4}); // self[i][j][k] = 12i + 4j + k
  const int64_t dim1[] = {1};
  Buffer out = empty(SPMD_F32, {2, 4});
  spmd_rt_sum(out.get(), self.get(), 1, dim1);
  expectF32(out, {12, 15, 18, 21, 48, 51, 54, 57});
  Buffer keep = empty(SPMD_F32, {2, 1, 4});
  spmd_rt_sum(keep.get(), self.get(), 1, dim1);
  expectF32(keep, {12, 15, 18, 21, 48, 51, 54, 57});

  const int64_t dims02[] = {0, 2};
  Buffer out02 = empty(SPMD_F32, {3});
  spmd_rt_sum(out02.get(), self.get(), 2, dims02);
  expectF32(out02, {60, 92, 124});
  Buffer keep02 = empty(SPMD_F32, {1, 3, 1});
  spmd_rt_sum(keep02.get(), self.get(), 2, dims02);
  expectF32(keep02, {60, 92, 124});

  const int64_t dim2[] = {2};
  Buffer out2 = empty(SPMD_F32, {2, 3});
  spmd_rt_sum(out2.get(), self.get(), 1, dim2);
  expectF32(out2, {6, 22, 38, 54, 70, 86});

  const int64_t dim0[] = {0};
  Buffer out0 = empty(SPMD_F32, {3, 4});
  spmd_rt_sum(out0.get(), self.get(), 1, dim0);
  std::vector<float> expected;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      expected.push_back(12.0f + 8 * j + 2 * k);
  expectF32(out0, expected);

  const int64_t all[] = {2, 0, 1};
  Buffer outAll = empty(SPMD_F32, {});
  spmd_rt_sum(outAll.get(), self.get(), 3, all);
  expectF32(outAll, {276});
}

TEST(RuntimeKernels, SumIntegers) {
  Buffer self = i64({2, 2}, {1, 2, 3, 4});
  const int64_t dim0[] = {0};
  Buffer out = empty(SPMD_I64, {2});
  spmd_rt_sum(out.get(), self.get(), 1, dim0);
  expectExact<int64_t>(out, {4, 6});
  // i32 and i1 sum to i64 (ATen's integer promotion).
  Buffer small = i32({3}, {1, 2, 3});
  Buffer total = empty(SPMD_I64, {});
  spmd_rt_sum(total.get(), small.get(), 0, nullptr);
  expectExact<int64_t>(total, {6});
  Buffer mask = i1({4}, {1, 0, 1, 1});
  spmd_rt_sum(total.get(), mask.get(), 0, nullptr);
  expectExact<int64_t>(total, {3});
  Buffer outI32 = empty(SPMD_I32, {});
  spmd_rt_sum(outI32.get(), small.get(), 0, nullptr);
  expectExact<int32_t>(outI32, {6});
}

TEST(RuntimeKernels, SumEmptyDimListIsCopyUnlessScalarOut) {
  Buffer self = iota<float>({2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_sum(out.get(), self.get(), 0, nullptr);
  expectF32(out, {0, 1, 2, 3, 4, 5});
  Buffer one = f32({1}, {4});
  Buffer scalar = empty(SPMD_F32, {});
  spmd_rt_sum(scalar.get(), one.get(), 0, nullptr);
  expectF32(scalar, {4});
}

TEST(RuntimeKernels, SumIsAccurate) {
  const int64_t n = 1000000;
  Buffer self = empty(SPMD_F32, {1000, 1000});
  spmd_rt_fill(self.get(), 0.1);
  Buffer out = empty(SPMD_F32, {});
  spmd_rt_sum(out.get(), self.get(), 0, nullptr);
  // 0.1f is 0.100000001490116...; a naive float loop is off by hundreds.
  expectF32(out, {static_cast<float>(n * static_cast<double>(0.1f))}, 1e-6);
  const int64_t dim0[] = {0};
  Buffer cols = empty(SPMD_F32, {1000});
  spmd_rt_sum(cols.get(), self.get(), 1, dim0);
  expectF32(cols, std::vector<float>(1000, 100.0000015f), 1e-6);
}

TEST_F(RuntimeKernelsDeathTest, SumRejectsBadDims) {
  Buffer self = iota<float>({2, 3});
  Buffer out = empty(SPMD_F32, {});
  const int64_t twice[] = {0, 0};
  EXPECT_DEATH(spmd_rt_sum(out.get(), self.get(), 2, twice),
               "spmd_rt_sum: dim 0 is listed twice");
  const int64_t dim1[] = {1};
  Buffer wrong = empty(SPMD_F32, {3});
  EXPECT_DEATH(spmd_rt_sum(wrong.get(), self.get(), 1, dim1),
               "spmd_rt_sum: out \\[3\\] is not self \\[2, 3\\] reduced");
}

TEST(RuntimeKernels, MeanOverDims) {
  Buffer self = iota<float>({2, 3, 4}); // self[i][j][k] = 12i + 4j + k
  const int64_t dim1[] = {1};
  Buffer out = empty(SPMD_F32, {2, 4});
  spmd_rt_mean(out.get(), self.get(), 1, dim1);
  expectF32(out, {4, 5, 6, 7, 16, 17, 18, 19});
  const int64_t dims02[] = {0, 2};
  Buffer keep02 = empty(SPMD_F64, {1, 3, 1});
  spmd_rt_mean(keep02.get(), self.get(), 2, dims02);
  expectNear<double>(keep02, {7.5, 11.5, 15.5});
  Buffer all = empty(SPMD_F32, {});
  spmd_rt_mean(all.get(), self.get(), 0, nullptr);
  expectF32(all, {11.5});
  // Over no elements: 0 / 0, as torch.mean of an empty dim.
  Buffer none = empty(SPMD_F32, {2, 0});
  Buffer nan = empty(SPMD_F32, {2});
  spmd_rt_mean(nan.get(), none.get(), 1, dim1);
  EXPECT_TRUE(std::isnan(values<float>(nan)[0]));
}

TEST(RuntimeKernels, AmaxOverDims) {
  Buffer self = f32({2, 3}, {1, -5, 3, -2, -7, -4});
  const int64_t dim0[] = {0}, dim1[] = {1};
  Buffer cols = empty(SPMD_F32, {3});
  spmd_rt_amax(cols.get(), self.get(), 1, dim0);
  expectF32(cols, {1, -5, 3});
  Buffer rows = empty(SPMD_F32, {2, 1});
  spmd_rt_amax(rows.get(), self.get(), 1, dim1);
  expectF32(rows, {3, -2});
  // NaN propagates (torch.amax).
  Buffer withNan = f32({3}, {1, NAN, 2});
  Buffer top = empty(SPMD_F32, {});
  spmd_rt_amax(top.get(), withNan.get(), 0, nullptr);
  EXPECT_TRUE(std::isnan(values<float>(top)[0]));
  // An empty shard holds the identity of max: -inf, or the lowest integer.
  Buffer none = empty(SPMD_F32, {0, 2});
  Buffer lowest = empty(SPMD_F32, {2});
  spmd_rt_amax(lowest.get(), none.get(), 1, dim0);
  EXPECT_EQ(values<float>(lowest), std::vector<float>(2, -INFINITY));
  Buffer ints = i32({2, 2}, {4, -9, 7, -3});
  Buffer intMax = empty(SPMD_I32, {2});
  spmd_rt_amax(intMax.get(), ints.get(), 1, dim0);
  expectExact<int32_t>(intMax, {7, -3});
  Buffer noInts = empty(SPMD_I32, {0});
  Buffer intLowest = empty(SPMD_I32, {});
  spmd_rt_amax(intLowest.get(), noInts.get(), 1, dim0);
  expectExact<int32_t>(intLowest, {std::numeric_limits<int32_t>::lowest()});
}

//===----------------------------------------------------------------------===//
// Softmax family (expected values: PyTorch 1.13)
//===----------------------------------------------------------------------===//

const std::vector<float> kLogits = {1, 2, 3, -1, 0, 4}; // [2, 3]
const std::vector<float> kSoftmaxGrad = {0.5f, -1, 2, 1, 1, -3};

TEST(RuntimeKernels, SoftmaxLastAndFirstDim) {
  Buffer self = f32({2, 3}, kLogits);
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_softmax(out.get(), self.get(), 1);
  expectF32(out, {0.090030573f, 0.24472848f, 0.66524094f, 0.0065732626f,
                  0.017867981f, 0.9755587f});
  spmd_rt_softmax(out.get(), self.get(), 0);
  expectF32(out, {0.88079703f, 0.88079703f, 0.26894143f, 0.11920292f,
                  0.11920292f, 0.7310586f});
}

TEST(RuntimeKernels, LogSoftmaxLastAndFirstDim) {
  Buffer self = f32({2, 3}, kLogits);
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_log_softmax(out.get(), self.get(), 1);
  expectF32(out, {-2.4076059f, -1.4076059f, -0.40760595f, -5.024745f,
                  -4.024745f, -0.024744924f});
  spmd_rt_log_softmax(out.get(), self.get(), 0);
  expectF32(out, {-0.12692805f, -0.12692805f, -1.3132616f, -2.1269281f,
                  -2.1269281f, -0.31326166f});
}

TEST(RuntimeKernels, SoftmaxIsStableForLargeLogits) {
  Buffer self = f32({1, 3}, {1000, 1001, 1002});
  Buffer out = empty(SPMD_F32, {1, 3});
  spmd_rt_softmax(out.get(), self.get(), 1);
  expectF32(out, {0.090030573f, 0.24472848f, 0.66524094f});
  spmd_rt_log_softmax(out.get(), self.get(), 1);
  expectF32(out, {-2.4076059f, -1.4076059f, -0.40760595f});
}

TEST(RuntimeKernels, SoftmaxMiddleDimMatchesDefinition) {
  // [2, 19, 3] over dim 1: lanes of 3, and rows longer than the 8 lanes of
  // the vectorised folds.
  const int64_t outer = 2, size = 19, inner = 3;
  std::vector<float> x;
  for (int64_t i = 0; i < outer * size * inner; ++i)
    x.push_back(static_cast<float>(std::sin(0.7 * i) * 4));
  Buffer self = f32({outer, size, inner}, x);
  Buffer out = empty(SPMD_F32, {outer, size, inner});
  Buffer logOut = empty(SPMD_F32, {outer, size, inner});
  spmd_rt_softmax(out.get(), self.get(), 1);
  spmd_rt_log_softmax(logOut.get(), self.get(), 1);
  std::vector<float> expected(x.size()), expectedLog(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < inner; ++l) {
      double sum = 0;
      for (int64_t d = 0; d < size; ++d)
        sum += std::exp(x[(o * size + d) * inner + l]);
      for (int64_t d = 0; d < size; ++d) {
        int64_t i = (o * size + d) * inner + l;
        expected[i] = static_cast<float>(std::exp(x[i]) / sum);
        expectedLog[i] = static_cast<float>(x[i] - std::log(sum));
      }
    }
  expectF32(out, expected);
  expectF32(logOut, expectedLog);
}

TEST(RuntimeKernels, SoftmaxMaskedAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer self = f32({3, 3}, {0, -inf, 1, -inf, -inf, -inf, 1, nan, 2});
  Buffer out = empty(SPMD_F32, {3, 3});
  spmd_rt_softmax(out.get(), self.get(), 1);
  const float e = static_cast<float>(M_E);
  // A fully masked row is NaN in ATen too (exp(-inf - -inf)).
  expectF32(out, {1 / (1 + e), 0, e / (1 + e), nan, nan, nan, nan, nan, nan});
  spmd_rt_log_softmax(out.get(), self.get(), 1);
  const float lse = static_cast<float>(std::log1p(M_E));
  expectF32(out, {-lse, -inf, 1 - lse, nan, nan, nan, nan, nan, nan});
}

/// softmax and log_softmax of `rows` x `cols` values over the last dim,
/// against a double reference.
template <typename T> void checkLongRows(int64_t rows, int64_t cols) {
  std::vector<T> x;
  for (int64_t i = 0; i < rows * cols; ++i)
    x.push_back(static_cast<T>(std::sin(0.37 * i) * 20));
  Buffer self = tensor<T>({rows, cols}, x);
  Buffer out = empty(dtypeOf<T>(), {rows, cols});
  Buffer logOut = empty(dtypeOf<T>(), {rows, cols});
  spmd_rt_softmax(out.get(), self.get(), 1);
  spmd_rt_log_softmax(logOut.get(), self.get(), 1);
  std::vector<T> expected, expectedLog;
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      max = std::max<double>(max, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c)
      sum += std::exp(x[r * cols + c] - max);
    for (int64_t c = 0; c < cols; ++c) {
      double v = x[r * cols + c] - max;
      expected.push_back(static_cast<T>(std::exp(v) / sum));
      expectedLog.push_back(static_cast<T>(v - std::log(sum)));
    }
  }
  expectNear<T>(out, expected, 1e-5, 1e-7);
  expectNear<T>(logOut, expectedLog, 1e-5, 1e-5);
}

TEST(RuntimeKernels, SoftmaxLongRows) {
  checkLongRows<float>(3, 1001);
  checkLongRows<float>(5, 37);
  checkLongRows<double>(2, 301);
}

TEST(RuntimeKernels, SoftmaxBackwardData) {
  Buffer grad = f32({2, 3}, kSoftmaxGrad);
  Buffer self = f32({2, 3}, kLogits);
  Buffer y = empty(SPMD_F32, {2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_softmax(y.get(), self.get(), 1);
  spmd_rt_softmax_backward_data(out.get(), grad.get(), y.get(), 1);
  expectF32(out, {-0.056788463f, -0.52145982f, 0.57824826f, 0.025650414f,
                  0.069725059f, -0.095375702f});
  spmd_rt_softmax(y.get(), self.get(), 0);
  spmd_rt_softmax_backward_data(out.get(), grad.get(), y.get(), 0);
  expectF32(out, {-0.052496757f, -0.20998719f, 0.9830597f, 0.052496795f,
                  0.20998715f, -0.98305964f});
}

TEST(RuntimeKernels, LogSoftmaxBackwardData) {
  Buffer grad = f32({2, 3}, kSoftmaxGrad);
  Buffer self = f32({2, 3}, kLogits);
  Buffer y = empty(SPMD_F32, {2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  spmd_rt_log_softmax(y.get(), self.get(), 1);
  spmd_rt_log_softmax_backward_data(out.get(), grad.get(), y.get(), 1);
  expectF32(out, {0.36495411f, -1.3670927f, 1.0021385f, 1.0065733f, 1.0178679f,
                  -2.0244412f});
  spmd_rt_log_softmax(y.get(), self.get(), 0);
  spmd_rt_log_softmax_backward_data(out.get(), grad.get(), y.get(), 0);
  expectF32(out,
            {-0.82119554f, -1.0f, 2.2689414f, 0.8211956f, 1.0f, -2.2689414f});
}

//===----------------------------------------------------------------------===//
// Layer norm (expected values: PyTorch 1.13)
//===----------------------------------------------------------------------===//

const std::vector<float> kLnInput = {1, 2, 4, -1, 0.5f, 3}; // [2, 3]
const std::vector<float> kLnWeight = {0.5f, 1, 2};
const std::vector<float> kLnBias = {0.1f, -0.2f, 0.3f};
const std::vector<float> kLnInput3 = {1, 2,    4,  0, -2, 1,
                                      3, 3.5f, -1, 2, 0,  1}; // [2, 2, 3]

TEST(RuntimeKernels, LayerNormWithWeightAndBias) {
  Buffer x = f32({2, 3}, kLnInput);
  Buffer w = f32({3}, kLnWeight);
  Buffer b = f32({3}, kLnBias);
  Buffer out = empty(SPMD_F32, {2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1});
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), x.get(), w.get(),
                            b.get(), 1, 1e-5);
  expectF32(out, {-0.43452069f, -0.4672603f, 2.9726036f, -0.45558289f,
                  -0.40203017f, 2.9263918f});
  expectF32(mean, {2.3333333f, 0.83333337f});
  expectF32(rstd, {0.80178106f, 0.60609043f});
}

TEST(RuntimeKernels, LayerNormWithoutAffineOverTwoDims) {
  Buffer x = f32({2, 2, 3}, kLnInput3);
  Buffer out = empty(SPMD_F32, {2, 2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1, 1});
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), x.get(), nullptr,
                            nullptr, 2, 1e-5);
  expectF32(out, {0.0f, 0.54772174f, 1.6431652f, -0.54772174f, -1.6431652f,
                  0.0f, 0.99450356f, 1.3085573f, -1.5179265f, 0.36639607f,
                  -0.88981891f, -0.26171142f});
  expectF32(mean, {1.0f, 1.4166666f});
  expectF32(rstd, {0.54772174f, 0.62810749f});
}

TEST(RuntimeKernels, LayerNormWeightOnly) {
  Buffer x = f32({2, 3}, kLnInput);
  Buffer w = f32({3}, kLnWeight);
  Buffer b = f32({3}, kLnBias);
  Buffer ref = empty(SPMD_F32, {2, 3});
  Buffer out = empty(SPMD_F32, {2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1});
  spmd_rt_native_layer_norm(ref.get(), mean.get(), rstd.get(), x.get(), w.get(),
                            b.get(), 1, 1e-5);
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), x.get(), w.get(),
                            nullptr, 1, 1e-5);
  std::vector<float> expected = values<float>(ref);
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] -= kLnBias[i % 3];
  expectF32(out, expected);
}

TEST(RuntimeKernels, LayerNormBackward) {
  Buffer x = f32({2, 3}, kLnInput);
  Buffer w = f32({3}, kLnWeight);
  Buffer b = f32({3}, kLnBias);
  Buffer out = empty(SPMD_F32, {2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1});
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), x.get(), w.get(),
                            b.get(), 1, 1e-5);
  Buffer dy = f32({2, 3}, {0.3f, -1, 2, 1.5f, 0.5f, -0.5f});
  Buffer dx = empty(SPMD_F32, {2, 3});
  Buffer dw = empty(SPMD_F32, {3});
  Buffer db = empty(SPMD_F32, {3});
  spmd_rt_native_layer_norm_backward(dx.get(), dw.get(), db.get(), dy.get(),
                                     x.get(), mean.get(), rstd.get(), w.get(),
                                     b.get(), 1);
  expectF32(dx,
            {0.83613229f, -1.2542176f, 0.41808462f, -0.10049787f, 0.16079983f,
             -0.06030196f},
            1e-5, 1e-5);
  expectF32(dw, {-1.9874611f, 0.16624522f, 2.0160055f});
  expectF32(db, {1.8f, -0.5f, 1.5f});

  // A NULL grad_input is skipped; the other results are unchanged.
  Buffer dw2 = empty(SPMD_F32, {3});
  spmd_rt_native_layer_norm_backward(nullptr, dw2.get(), nullptr, dy.get(),
                                     x.get(), mean.get(), rstd.get(), w.get(),
                                     b.get(), 1);
  expectF32(dw2, values<float>(dw), 0, 0);
}

TEST(RuntimeKernels, LayerNormBackwardWithoutWeight) {
  Buffer x = f32({2, 2, 3}, kLnInput3);
  Buffer out = empty(SPMD_F32, {2, 2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1, 1});
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), x.get(), nullptr,
                            nullptr, 2, 1e-5);
  Buffer dy = f32({2, 2, 3},
                  {0.3f, -1, 2, 1.5f, 0.5f, -0.5f, 1, 2, -1, 0, 0.5f, 0.25f});
  Buffer dx = empty(SPMD_F32, {2, 2, 3});
  spmd_rt_native_layer_norm_backward(dx.get(), nullptr, nullptr, dy.get(),
                                     x.get(), mean.get(), rstd.get(), nullptr,
                                     nullptr, 2);
  expectF32(dx,
            {-0.091286957f, -0.85809726f, 0.67552394f, 0.62075114f, 0.18257344f,
             -0.52946436f, -0.14067708f, 0.33556664f, -0.18198191f,
             -0.46505702f, 0.45645177f, -0.0043026209f},
            1e-5, 1e-5);
}

TEST(RuntimeKernels, LayerNormLongRowsMatchDefinition) {
  const int64_t rows = 3, cols = 1027;
  std::vector<float> x, w, b;
  for (int64_t i = 0; i < rows * cols; ++i)
    x.push_back(static_cast<float>(100 + std::sin(0.37 * i) * 3));
  for (int64_t j = 0; j < cols; ++j) {
    w.push_back(static_cast<float>(1 + 0.001 * j));
    b.push_back(static_cast<float>(0.01 * (j % 7)));
  }
  Buffer in = f32({rows, cols}, x), weight = f32({cols}, w),
         bias = f32({cols}, b);
  Buffer out = empty(SPMD_F32, {rows, cols});
  Buffer mean = empty(SPMD_F32, {rows, 1}), rstd = empty(SPMD_F32, {rows, 1});
  spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(), in.get(),
                            weight.get(), bias.get(), 1, 1e-5);
  std::vector<float> expected, expectedMean, expectedRstd;
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mu += x[r * cols + j];
    mu /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
    var /= cols;
    const double rs = 1 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < cols; ++j)
      expected.push_back(
          static_cast<float>((x[r * cols + j] - mu) * rs * w[j] + b[j]));
    expectedMean.push_back(static_cast<float>(mu));
    expectedRstd.push_back(static_cast<float>(rs));
  }
  // Inputs near 100 with unit spread: float rounding of x - mean allows
  // ~1e-5 absolute.
  expectF32(out, expected, 1e-5, 3e-5);
  expectF32(mean, expectedMean);
  expectF32(rstd, expectedRstd);
}

TEST_F(RuntimeKernelsDeathTest, LayerNormRejectsBadShapes) {
  Buffer x = f32({2, 3}, kLnInput);
  Buffer w = f32({2}, {1, 1});
  Buffer out = empty(SPMD_F32, {2, 3});
  Buffer mean = empty(SPMD_F32, {2, 1});
  Buffer rstd = empty(SPMD_F32, {2, 1});
  EXPECT_DEATH(spmd_rt_native_layer_norm(out.get(), mean.get(), rstd.get(),
                                         x.get(), w.get(), nullptr, 1, 1e-5),
               "spmd_rt_native_layer_norm: weight \\[2\\] does not match");
  Buffer badMean = empty(SPMD_F32, {2});
  EXPECT_DEATH(spmd_rt_native_layer_norm(out.get(), badMean.get(), rstd.get(),
                                         x.get(), nullptr, nullptr, 1, 1e-5),
               "spmd_rt_native_layer_norm: mean \\[2\\] does not match");
}

//===----------------------------------------------------------------------===//
// Attention (hand-checked: E = 1, scale 1, keys {0, ln 3}, values {1, 5}:
// a query of 1 scores {0, ln 3}, softmax {1/4, 3/4}, output 4, logsumexp
// ln 4; a query of 0 scores {0, 0}, output 3, logsumexp ln 2)
//===----------------------------------------------------------------------===//

const float kLn3 = std::log(3.0f);

/// Runs spmd_rt_attention on query [1, 1, L, 1] and the keys and values
/// above; returns {output, logsumexp}.
std::pair<Buffer, Buffer> attention(std::vector<float> query,
                                    const SpmdBuffer *mask, bool causal) {
  const int64_t l = static_cast<int64_t>(query.size());
  Buffer q = f32({1, 1, l, 1}, std::move(query));
  Buffer k = f32({1, 1, 2, 1}, {0, kLn3});
  Buffer v = f32({1, 1, 2, 1}, {1, 5});
  Buffer out = empty(SPMD_F32, {1, 1, l, 1});
  Buffer lse = empty(SPMD_F32, {1, 1, l});
  spmd_rt_attention(out.get(), lse.get(), q.get(), k.get(), v.get(), mask,
                    causal, 1.0);
  return {std::move(out), std::move(lse)};
}

TEST(RuntimeKernels, Attention) {
  auto [out, lse] = attention({1, 0}, nullptr, false);
  expectF32(out, {4, 3});
  expectF32(lse, {std::log(4.0f), std::log(2.0f)});
}

// Query i sees keys j <= i, top-left aligned: with L = 3 > S = 2 the last
// query sees both keys.
TEST(RuntimeKernels, AttentionCausal) {
  auto [out, lse] = attention({1, 0, 1}, nullptr, true);
  expectF32(out, {1, 3, 4});
  expectF32(lse, {0, std::log(2.0f), std::log(4.0f)});
}

// The mask is added to the scores; a row that sees no key gives zeros and
// logsumexp 0 (ATen's CPU kernel).
TEST(RuntimeKernels, AttentionMask) {
  const float inf = std::numeric_limits<float>::infinity();
  Buffer mask = f32({3, 2}, {0, -inf, kLn3, 0, -inf, -inf});
  auto [out, lse] = attention({1, 0, 1}, mask.get(), false);
  expectF32(out, {1, 2, 0});
  expectF32(lse, {0, std::log(4.0f), 0});
}

// A [B, 1, L, S] mask broadcasts over the heads; scale multiplies the
// scores before the mask is added. Query 2 scaled by 0.5 scores {0, ln 3}.
TEST(RuntimeKernels, AttentionBroadcastMaskAndScale) {
  const double ln3 = std::log(3.0),
               inf = std::numeric_limits<double>::infinity();
  Buffer q = f64({2, 2, 1, 1}, {2, 2, 2, 2});
  Buffer k = f64({2, 2, 2, 1}, {0, ln3, 0, ln3, 0, ln3, 0, ln3});
  Buffer v = f64({2, 2, 2, 1}, {1, 5, 1, 5, 1, 5, 1, 5});
  Buffer mask = f64({2, 1, 1, 2}, {0, 0, 0, -inf});
  Buffer out = empty(SPMD_F64, {2, 2, 1, 1});
  Buffer lse = empty(SPMD_F64, {2, 2, 1});
  spmd_rt_attention(out.get(), lse.get(), q.get(), k.get(), v.get(), mask.get(),
                    0, 0.5);
  expectNear<double>(out, {4, 4, 1, 1}, 1e-12, 1e-12);
  expectNear<double>(lse, {std::log(4.0), std::log(4.0), 0, 0}, 1e-12, 1e-12);
}

// Query 1 against the keys and values above, grad_out 1: P = {1/4, 3/4},
// dV = P = {1/4, 3/4}, dP = {1, 5}, D = dO . O = 4, dS = P (dP - D) =
// {-3/4, 3/4}, dQ = dS . K = 3/4 ln 3, dK = dS q = {-3/4, 3/4}. Causal with
// queries {1, 1}: query 0 sees key 0 only (P = {1, 0}, dS = 0), query 1 as
// before: dV = {1 + 1/4, 3/4}.
TEST(RuntimeKernels, AttentionBackward) {
  for (bool causal : {false, true}) {
    std::vector<float> query =
        causal ? std::vector<float>{1, 1} : std::vector<float>{1};
    const int64_t l = static_cast<int64_t>(query.size());
    Buffer q = f32({1, 1, l, 1}, query);
    Buffer k = f32({1, 1, 2, 1}, {0, kLn3});
    Buffer v = f32({1, 1, 2, 1}, {1, 5});
    auto [out, lse] = attention(query, nullptr, causal);
    Buffer dout = f32({1, 1, l, 1}, std::vector<float>(l, 1.0f));
    Buffer dq = empty(SPMD_F32, {1, 1, l, 1});
    Buffer dk = empty(SPMD_F32, {1, 1, 2, 1});
    Buffer dv = empty(SPMD_F32, {1, 1, 2, 1});
    spmd_rt_attention_backward(dq.get(), dk.get(), dv.get(), dout.get(),
                               q.get(), k.get(), v.get(), out.get(), lse.get(),
                               nullptr, causal, 1.0);
    if (causal) {
      expectF32(dq, {0, 0.75f * kLn3});
      expectF32(dv, {1.25f, 0.75f});
    } else {
      expectF32(dq, {0.75f * kLn3});
      expectF32(dv, {0.25f, 0.75f});
    }
    expectF32(dk, {-0.75f, 0.75f});
  }
}

// A row that sees no key has no gradient (zeros, not NaN).
TEST(RuntimeKernels, AttentionBackwardHiddenRow) {
  const float inf = std::numeric_limits<float>::infinity();
  Buffer mask = f32({1, 2}, {-inf, -inf});
  Buffer q = f32({1, 1, 1, 1}, {1});
  Buffer k = f32({1, 1, 2, 1}, {0, kLn3});
  Buffer v = f32({1, 1, 2, 1}, {1, 5});
  auto [out, lse] = attention({1}, mask.get(), false);
  expectF32(out, {0});
  Buffer dout = f32({1, 1, 1, 1}, {1});
  Buffer dq = empty(SPMD_F32, {1, 1, 1, 1});
  Buffer dk = empty(SPMD_F32, {1, 1, 2, 1});
  Buffer dv = empty(SPMD_F32, {1, 1, 2, 1});
  spmd_rt_attention_backward(dq.get(), dk.get(), dv.get(), dout.get(), q.get(),
                             k.get(), v.get(), out.get(), lse.get(), mask.get(),
                             0, 1.0);
  expectF32(dq, {0});
  expectF32(dk, {0, 0});
  expectF32(dv, {0, 0});
}

TEST_F(RuntimeKernelsDeathTest, AttentionRejectsBadShapes) {
  Buffer q = empty(SPMD_F32, {1, 2, 3, 4});
  Buffer k = empty(SPMD_F32, {1, 2, 5, 4});
  Buffer v3 = empty(SPMD_F32, {1, 2, 6, 4});
  Buffer lse = empty(SPMD_F32, {1, 2, 3});
  Buffer out = empty(SPMD_F32, {1, 2, 3, 4});
  EXPECT_DEATH(spmd_rt_attention(out.get(), lse.get(), q.get(), k.get(),
                                 v3.get(), nullptr, 0, 1.0),
               "spmd_rt_attention: query \\[1, 2, 3, 4\\], key \\[1, 2, 5, "
               "4\\] and value \\[1, 2, 6, 4\\] do not match");
  Buffer mask = empty(SPMD_F32, {3, 4});
  EXPECT_DEATH(spmd_rt_attention(out.get(), lse.get(), q.get(), k.get(),
                                 k.get(), mask.get(), 0, 1.0),
               "spmd_rt_attention: attn_mask \\[3, 4\\] does not broadcast");
  Buffer lse64 = empty(SPMD_F64, {1, 2, 3});
  EXPECT_DEATH(spmd_rt_attention(out.get(), lse64.get(), q.get(), k.get(),
                                 k.get(), nullptr, 0, 1.0),
               "spmd_rt_attention: logsumexp must be f32 for a f32 query");
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST(RuntimeKernels, Embedding) {
  Buffer weight = f32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Buffer idx = i64({2, 2}, {3, 0, 1, 3});
  Buffer out = empty(SPMD_F32, {2, 2, 2});
  spmd_rt_embedding(out.get(), weight.get(), idx.get(), -1);
  expectF32(out, {30, 31, 0, 1, 10, 11, 30, 31});
  Buffer idx32 = i32({2}, {2, 2});
  Buffer out32 = empty(SPMD_F32, {2, 2});
  // padding_idx does not change the forward.
  spmd_rt_embedding(out32.get(), weight.get(), idx32.get(), 2);
  expectF32(out32, {20, 21, 20, 21});
}

TEST(RuntimeKernels, EmbeddingDenseBackwardSkipsPadding) {
  Buffer grad = f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Buffer idx = i64({4}, {1, 3, 1, 0});
  Buffer out = empty(SPMD_F32, {4, 2});
  spmd_rt_embedding_dense_backward(out.get(), grad.get(), idx.get(), 0, 0);
  expectF32(out, {0, 0, 6, 8, 0, 0, 3, 4});
  spmd_rt_embedding_dense_backward(out.get(), grad.get(), idx.get(), -1, 0);
  expectF32(out, {7, 8, 6, 8, 0, 0, 3, 4});
}

TEST(RuntimeKernels, EmbeddingDenseBackwardScaleGradByFreq) {
  Buffer grad = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Buffer idx = i32({2, 2}, {1, 3, 1, 0});
  Buffer out = empty(SPMD_F32, {4, 2});
  spmd_rt_embedding_dense_backward(out.get(), grad.get(), idx.get(), 0, 1);
  expectF32(out, {0, 0, 3, 4, 0, 0, 3, 4});
}

TEST_F(RuntimeKernelsDeathTest, EmbeddingRejectsOutOfRangeIndices) {
  Buffer weight = f32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Buffer idx = i64({2}, {1, 4});
  Buffer out = empty(SPMD_F32, {2, 2});
  EXPECT_DEATH(spmd_rt_embedding(out.get(), weight.get(), idx.get(), -1),
               "spmd_rt_embedding: index 4 at position 1 is out of range "
               "\\[0, 4\\)");
  Buffer neg = i32({1}, {-1});
  Buffer out1 = empty(SPMD_F32, {1, 2});
  EXPECT_DEATH(spmd_rt_embedding(out1.get(), weight.get(), neg.get(), -1),
               "spmd_rt_embedding: index -1");
  Buffer grad = f32({2, 2}, {1, 2, 3, 4});
  Buffer gw = empty(SPMD_F32, {4, 2});
  EXPECT_DEATH(
      spmd_rt_embedding_dense_backward(gw.get(), grad.get(), idx.get(), -1, 0),
      "spmd_rt_embedding_dense_backward: index 4");
  Buffer fidx = f32({2}, {1, 2});
  EXPECT_DEATH(spmd_rt_embedding(out.get(), weight.get(), fidx.get(), -1),
               "spmd_rt_embedding: unsupported dtype f32 for indices");
}

//===----------------------------------------------------------------------===//
// NLL loss (expected values: PyTorch 1.13)
//===----------------------------------------------------------------------===//

// log_softmax of a [4, 3] batch; targets {1, 2, 0, 2}; weight {0.2, 1, 3}.
const std::vector<float> kLogProbs = {-1.4643688f,  -0.46436879f, -1.9643688f,
                                      -2.0817845f,  -3.1817846f,  -0.18178451f,
                                      -0.16984604f, -3.1698461f,  -2.1698461f,
                                      -1.0986123f,  -1.0986123f,  -1.0986123f};
const std::vector<int64_t> kTargets = {1, 2, 0, 2};
const std::vector<float> kClassWeight = {0.2f, 1, 3};

struct NllCase {
  int64_t reduction;
  bool weighted;
  int64_t ignoreIndex;
  std::vector<float> output;
  float totalWeight;
  std::vector<float> gradInput; // for grad_output {1, -2, 0.5, 3} or 1.5
};

const NllCase kNllCases[] = {
    {0,
     false,
     -100,
     {0.46436879f, 0.18178451f, 0.16984604f, 1.0986123f},
     0,
     {0, -1, 0, 0, 0, 2, -0.5f, 0, 0, 0, 0, -3}},
    {0,
     false,
     2,
     {0.46436879f, 0, 0.16984604f, 0},
     0,
     {0, -1, 0, 0, 0, 0, -0.5f, 0, 0, 0, 0, 0}},
    {0,
     true,
     -100,
     {0.46436879f, 0.54535353f, 0.033969209f, 3.2958369f},
     0,
     {0, -1, 0, 0, 0, 6, -0.1f, 0, 0, 0, 0, -9}},
    {1,
     false,
     -100,
     {0.47865292f},
     4,
     {0, -0.375f, 0, 0, 0, -0.375f, -0.375f, 0, 0, 0, 0, -0.375f}},
    {1,
     false,
     2,
     {0.31710741f},
     2,
     {0, -0.75f, 0, 0, 0, 0, -0.75f, 0, 0, 0, 0, 0}},
    {1,
     true,
     -100,
     {0.60271233f},
     7.2f,
     {0, -0.20833334f, 0, 0, 0, -0.625f, -0.041666668f, 0, 0, 0, 0, -0.625f}},
    {1,
     true,
     2,
     {0.41528162f},
     1.2f,
     {0, -1.25f, 0, 0, 0, 0, -0.25f, 0, 0, 0, 0, 0}},
    {2,
     false,
     -100,
     {1.9146117f},
     4,
     {0, -1.5f, 0, 0, 0, -1.5f, -1.5f, 0, 0, 0, 0, -1.5f}},
    {2,
     true,
     -100,
     {4.3395286f},
     7.2f,
     {0, -1.5f, 0, 0, 0, -4.5f, -0.3f, 0, 0, 0, 0, -4.5f}},
    {2,
     true,
     2,
     {0.49833798f},
     1.2f,
     {0, -1.5f, 0, 0, 0, 0, -0.3f, 0, 0, 0, 0, 0}},
};

TEST(RuntimeKernels, NllLossForwardAndBackward) {
  Buffer self = f32({4, 3}, kLogProbs);
  Buffer target = i64({4}, kTargets);
  Buffer weight = f32({3}, kClassWeight);
  for (const NllCase &c : kNllCases) {
    SCOPED_TRACE("reduction " + std::to_string(c.reduction) + " weighted " +
                 std::to_string(c.weighted) + " ignore_index " +
                 std::to_string(c.ignoreIndex));
    Shape outShape = c.reduction == 0 ? Shape{4} : Shape{};
    Buffer out = empty(SPMD_F32, outShape);
    Buffer total = empty(SPMD_F32, {});
    const SpmdBuffer *w = c.weighted ? weight.get() : nullptr;
    spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(), target.get(),
                             w, c.reduction, c.ignoreIndex);
    expectF32(out, c.output);
    expectF32(total, {c.totalWeight});

    Buffer grad =
        c.reduction == 0 ? f32({4}, {1, -2, 0.5f, 3}) : f32({}, {1.5f});
    Buffer gradInput = empty(SPMD_F32, {4, 3});
    spmd_rt_nll_loss_backward(gradInput.get(), grad.get(), self.get(),
                              target.get(), w, total.get(), c.reduction,
                              c.ignoreIndex);
    expectF32(gradInput, c.gradInput);
  }
}

TEST(RuntimeKernels, NllLossUnbatched) {
  Buffer self = f32({3}, {-1.4643688f, -0.46436879f, -1.9643688f});
  Buffer target = i64({}, {1});
  Buffer out = empty(SPMD_F32, {});
  Buffer total = empty(SPMD_F32, {});
  Buffer grad = f32({}, {2});
  Buffer gradInput = empty(SPMD_F32, {3});
  for (int64_t reduction : {0, 1, 2}) {
    spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(), target.get(),
                             nullptr, reduction, -100);
    expectF32(out, {0.46436879f});
    expectF32(total, {1});
    spmd_rt_nll_loss_backward(gradInput.get(), grad.get(), self.get(),
                              target.get(), nullptr, total.get(), reduction,
                              -100);
    expectF32(gradInput, {0, -2, 0});
  }
  // Everything ignored: mean is 0 / 0.
  spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(), target.get(),
                           nullptr, 1, 1);
  expectF32(out, {std::numeric_limits<float>::quiet_NaN()});
  expectF32(total, {0});
  spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(), target.get(),
                           nullptr, 2, 1);
  expectF32(out, {0});
}

TEST_F(RuntimeKernelsDeathTest, NllLossRejectsOutOfRangeTargets) {
  Buffer self = f32({4, 3}, kLogProbs);
  Buffer target = i64({4}, {1, 3, 0, 2});
  Buffer out = empty(SPMD_F32, {});
  Buffer total = empty(SPMD_F32, {});
  EXPECT_DEATH(spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(),
                                        target.get(), nullptr, 1, -100),
               "spmd_rt_nll_loss_forward: target 3 of sample 1 is out of "
               "bounds");
  Buffer grad = f32({}, {1});
  Buffer gradInput = empty(SPMD_F32, {4, 3});
  EXPECT_DEATH(spmd_rt_nll_loss_backward(gradInput.get(), grad.get(),
                                         self.get(), target.get(), nullptr,
                                         total.get(), 1, -100),
               "spmd_rt_nll_loss_backward: target 3");
  EXPECT_DEATH(spmd_rt_nll_loss_forward(out.get(), total.get(), self.get(),
                                        target.get(), nullptr, 3, -100),
               "spmd_rt_nll_loss_forward: reduction must be");
}

//===----------------------------------------------------------------------===//
// Random kernels (any uniform source)
//===----------------------------------------------------------------------===//

class RuntimeKernelsRandomTest : public ::testing::Test {
protected:
  void SetUp() override {
    spmd_rt_set_seed(1234);
    spmd_rt_set_step(0);
  }
};

/// The [6, 8] global tensor of bernoulli draws of op 7, in pieces.
Buffer bernoulliPiece(const Shape &shape, const Shape &offset, double p) {
  const Shape global = {6, 8};
  Buffer out = empty(SPMD_F32, shape);
  spmd_rt_bernoulli_p(out.get(), p, 7, global.data(), offset.data());
  return out;
}

TEST_F(RuntimeKernelsRandomTest, BernoulliValuesAreZeroOrOne) {
  std::vector<float> full = values<float>(bernoulliPiece({6, 8}, {0, 0}, 0.5));
  int ones = 0;
  for (float v : full) {
    EXPECT_TRUE(v == 0.0f || v == 1.0f) << v;
    ones += v == 1.0f;
  }
  EXPECT_GT(ones, 0);
  EXPECT_LT(ones, 48);
  expectF32(bernoulliPiece({6, 8}, {0, 0}, 0.0), std::vector<float>(48, 0));
  expectF32(bernoulliPiece({6, 8}, {0, 0}, 1.0), std::vector<float>(48, 1));
}

TEST_F(RuntimeKernelsRandomTest, BernoulliDrawsFollowGlobalIndex) {
  std::vector<float> full = values<float>(bernoulliPiece({6, 8}, {0, 0}, 0.5));
  // Rows [2, 5) and columns [3, 8): element (i, j) is global (2 + i, 3 + j).
  std::vector<float> piece = values<float>(bernoulliPiece({3, 5}, {2, 3}, 0.5));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(piece[i * 5 + j], full[(2 + i) * 8 + 3 + j]) << i << "," << j;
  // Two halves along each dim reassemble the full tensor.
  std::vector<float> top = values<float>(bernoulliPiece({3, 8}, {0, 0}, 0.5));
  std::vector<float> bottom =
      values<float>(bernoulliPiece({3, 8}, {3, 0}, 0.5));
  top.insert(top.end(), bottom.begin(), bottom.end());
  EXPECT_EQ(top, full);
  std::vector<float> left = values<float>(bernoulliPiece({6, 4}, {0, 0}, 0.5));
  std::vector<float> right = values<float>(bernoulliPiece({6, 4}, {0, 4}, 0.5));
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_EQ(j < 4 ? left[i * 4 + j] : right[i * 4 + j - 4],
                full[i * 8 + j]);
}

TEST_F(RuntimeKernelsRandomTest, BernoulliPaddedPieceDrawsTheValidRows) {
  // 6 rows over 4 ranks in pieces of 2 (uneven: 2, 2, 2, 0), each padded to
  // the largest: the last piece past the end, the last rank's empty.
  std::vector<float> full = values<float>(bernoulliPiece({6, 8}, {0, 0}, 0.5));
  std::vector<float> last = values<float>(bernoulliPiece({4, 8}, {3, 0}, 0.5));
  EXPECT_EQ(std::vector<float>(last.begin(), last.begin() + 24),
            std::vector<float>(full.begin() + 24, full.end()));
  EXPECT_EQ(values<float>(bernoulliPiece({2, 8}, {6, 0}, 0.5)).size(), 16u);
}

TEST_F(RuntimeKernelsDeathTest, BernoulliRejectsAnOffsetOutsideTheTensor) {
  EXPECT_DEATH(bernoulliPiece({2, 8}, {7, 0}, 0.5),
               "spmd_rt_bernoulli_p: local \\[2, 8\\] at offset 7 of dim 0 is "
               "outside the global size 6");
}

TEST_F(RuntimeKernelsRandomTest, UniformDrawsBernoullisNumbersInItsRange) {
  // Both kernels read draw (op 7, global index): u < p is bernoulli's 1.
  const Shape global = {6, 8}, offset = {2, 3};
  Buffer u = empty(SPMD_F64, {3, 5});
  spmd_rt_uniform_range(u.get(), 0.0, 1.0, 7, global.data(), offset.data());
  std::vector<double> draws = values<double>(u);
  std::vector<float> kept = values<float>(bernoulliPiece({3, 5}, offset, 0.5));
  for (size_t i = 0; i < draws.size(); ++i) {
    EXPECT_GE(draws[i], 0.0);
    EXPECT_LT(draws[i], 1.0);
    EXPECT_EQ(draws[i] < 0.5, kept[i] == 1.0f) << i;
  }
  // [from, to) is the draw scaled and moved.
  Buffer scaled = empty(SPMD_F64, {3, 5});
  spmd_rt_uniform_range(scaled.get(), -2.0, 3.0, 7, global.data(),
                        offset.data());
  std::vector<double> moved = values<double>(scaled);
  for (size_t i = 0; i < draws.size(); ++i)
    EXPECT_DOUBLE_EQ(moved[i], -2.0 + 5.0 * draws[i]);
}

TEST_F(RuntimeKernelsRandomTest, ExponentialInvertsItsCdfAtTheUniformDraw) {
  const Shape global = {6, 8}, offset = {1, 2};
  Buffer u = empty(SPMD_F64, {4, 6}), e = empty(SPMD_F64, {4, 6});
  spmd_rt_uniform_range(u.get(), 0.0, 1.0, 9, global.data(), offset.data());
  spmd_rt_exponential(e.get(), 2.0, 9, global.data(), offset.data());
  std::vector<double> draws = values<double>(u), numbers = values<double>(e);
  for (size_t i = 0; i < draws.size(); ++i) {
    EXPECT_GE(numbers[i], 0.0);
    EXPECT_DOUBLE_EQ(numbers[i], -std::log1p(-draws[i]) / 2.0) << i;
  }
}

struct Dropout {
  Buffer output, mask;
};
Dropout dropoutPiece(const Buffer &input, const Shape &global,
                     const Shape &offset, double p, int64_t train) {
  Dropout d{empty(SPMD_F32, shapeOf(input)), empty(SPMD_I1, shapeOf(input))};
  spmd_rt_native_dropout(d.output.get(), d.mask.get(), input.get(), p, train, 3,
                         global.data(), offset.data());
  return d;
}

TEST_F(RuntimeKernelsRandomTest, NativeDropoutScalesKeptElements) {
  Buffer counts = iota<float>({8, 8});
  Buffer input = empty(SPMD_F32, {8, 8});
  spmd_rt_add_scalar(input.get(), counts.get(), 1.0, 1.0); // no zeros
  const double p = 0.25;
  Dropout d = dropoutPiece(input, {8, 8}, {0, 0}, p, 1);
  std::vector<float> x = values<float>(input), y = values<float>(d.output);
  std::vector<uint8_t> m = values<uint8_t>(d.mask);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  int kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(m[i] == 0 || m[i] == 1);
    kept += m[i];
    EXPECT_EQ(y[i], m[i] ? x[i] * scale : 0.0f) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 64);

  // The backward applies the same mask and scale.
  Buffer grad = empty(SPMD_F32, {8, 8});
  spmd_rt_fill(grad.get(), 2.0);
  Buffer dx = empty(SPMD_F32, {8, 8});
  spmd_rt_native_dropout_backward(dx.get(), grad.get(), d.mask.get(),
                                  1.0 / (1.0 - p));
  std::vector<float> g = values<float>(dx);
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(g[i], m[i] ? 2.0f * scale : 0.0f);
}

TEST_F(RuntimeKernelsRandomTest, NativeDropoutEdgeCases) {
  Buffer input = iota<float>({4, 4});
  std::vector<float> x = values<float>(input);
  Dropout keepAll = dropoutPiece(input, {4, 4}, {0, 0}, 0.0, 1);
  EXPECT_EQ(values<float>(keepAll.output), x);
  EXPECT_EQ(values<uint8_t>(keepAll.mask), std::vector<uint8_t>(16, 1));
  Dropout eval = dropoutPiece(input, {4, 4}, {0, 0}, 0.5, 0);
  EXPECT_EQ(values<float>(eval.output), x);
  EXPECT_EQ(values<uint8_t>(eval.mask), std::vector<uint8_t>(16, 1));
  Dropout dropAll = dropoutPiece(input, {4, 4}, {0, 0}, 1.0, 1);
  EXPECT_EQ(values<float>(dropAll.output), std::vector<float>(16, 0));
  EXPECT_EQ(values<uint8_t>(dropAll.mask), std::vector<uint8_t>(16, 0));
}

TEST_F(RuntimeKernelsRandomTest, NativeDropoutDrawsFollowGlobalIndex) {
  Buffer input = iota<float>({4, 6});
  Dropout full = dropoutPiece(input, {4, 6}, {0, 0}, 0.5, 1);
  std::vector<uint8_t> mask = values<uint8_t>(full.mask);
  std::vector<float> x = values<float>(input), l, r;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      (j < 3 ? l : r).push_back(x[i * 6 + j]);
  Buffer leftIn = f32({4, 3}, l), rightIn = f32({4, 3}, r);
  Dropout a = dropoutPiece(leftIn, {4, 6}, {0, 0}, 0.5, 1);
  Dropout b = dropoutPiece(rightIn, {4, 6}, {0, 3}, 0.5, 1);
  std::vector<uint8_t> ma = values<uint8_t>(a.mask),
                       mb = values<uint8_t>(b.mask);
  std::vector<float> y = values<float>(full.output);
  std::vector<float> ya = values<float>(a.output), yb = values<float>(b.output);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      const int64_t k = i * 3 + j % 3;
      EXPECT_EQ(j < 3 ? ma[k] : mb[k], mask[i * 6 + j]);
      EXPECT_EQ(j < 3 ? ya[k] : yb[k], y[i * 6 + j]);
    }
}

TEST(RuntimeKernels, NativeDropoutBackward) {
  Buffer grad = f32({4}, {1, 2, 3, 4});
  Buffer mask = i1({4}, {1, 0, 1, 1});
  Buffer out = empty(SPMD_F32, {4});
  spmd_rt_native_dropout_backward(out.get(), grad.get(), mask.get(), 2.0);
  expectF32(out, {2, 0, 6, 8});
}

} // namespace
