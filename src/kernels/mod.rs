//! ONNX-agnostic CPU compute kernels (fp32): GEMM, convolution, pooling, element-wise,
//! softmax, transpose, activations.
//!
//! Nothing here knows about ONNX; operators in the runtime map onto these functions.
//!
//! # Overview
//! - [`cpu`]: [`cpu::Isa`] (`Avx512`, `Avx2Fma`, `Portable`), detected once by [`cpu::isa`];
//!   `ONNXIFI_RUST_FORCE_PORTABLE=1` forces the portable code.
//! - [`gemm`]: BLIS-style `sgemm` — `C = act(alpha·A·B + beta·C + bias)` with strided
//!   [`gemm::MatRef`] operands (transposes are strides), prepacked constant operands
//!   ([`gemm::PackedA`], [`gemm::PackedB`]) and a fused [`gemm::Epilogue`].
//! - [`conv`]: [`conv::Conv2d`], NCHW 2-D convolution prepared once (pointwise / im2col+GEMM /
//!   depthwise paths), with fused bias and activation; `depthwise` holds the per-plane loops of
//!   the depthwise path.
//! - [`conv_transpose`]: transposed convolution in 1 to 3 spatial dimensions, as a GEMM over
//!   weights packed once and a scatter of its columns into the output.
//! - [`pool`]: max/average 2-D pooling with ONNX padding semantics, global pooling.
//! - [`elementwise`]: broadcasting binary ops, per-channel affine (BatchNormalization).
//! - [`broadcast`]: numpy-broadcasting maps of one to three inputs, for any element type.
//! - [`scalar`]: [`scalar::Scalar`], arithmetic on every numeric element type.
//! - [`scratch`]: scratch buffers kept between calls (no allocation once warm), cache-line
//!   aligned ([`aligned::AlignedVec`]).
//! - [`resize`]: separable interpolation of planes (nearest as gathers, linear, cubic).
//! - [`softmax`]: softmax / log-softmax along an axis.
//! - [`layer_norm`]: layer normalization of rows, statistics in float64.
//! - [`transpose`]: N-D axis permutation.
//! - [`activation`]: [`activation::Activation`] (Relu, LeakyRelu, Clip, Sigmoid, Tanh, Erf, Gelu).
//! - [`reference`](mod@reference): naive oracles of all of the above, for tests.
//!
//! # Conventions
//! Kernels take slices plus explicit dimensions and check lengths (a mismatch is a caller bug
//! and panics). Parallel kernels use rayon's *current* pool — run them inside
//! `pool.install(..)` to choose the threads — and stay on the calling thread for small
//! problems. `unsafe` is confined to `simd` (micro-kernels and `#[target_feature]`
//! trampolines); every other module is `#![forbid(unsafe_code)]`.

#![warn(missing_docs)]

pub mod activation;
pub mod aligned;
pub mod broadcast;
pub mod conv;
pub mod conv_transpose;
pub mod cpu;
mod depthwise;
pub mod elementwise;
pub mod gemm;
pub mod layer_norm;
pub mod nchwc;
pub mod peak;
pub mod pool;
pub mod reference;
pub mod resize;
pub mod scalar;
pub mod scratch;
mod simd;
pub mod softmax;
pub mod transpose;
pub mod winograd;

pub use activation::Activation;
pub use cpu::Isa;

/// An invalid kernel configuration (bad shapes or parameters), reported when preparing a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelError {
    /// What is wrong.
    pub message: String,
}

impl KernelError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        KernelError {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KernelError {}
