//! A kernel launched through cudarc on memory from the `rmm` crate (its `cudarc` feature): our
//! `DeviceVector<u32>` is a cudarc copy endpoint and kernel argument, and cudarc's stream is the
//! stream of our allocation, copies and free. The kernel is PTX text (no compiler needed).
//! `tests/kernel.rs` runs it on a GPU.

use std::sync::Arc;

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use rmm::cudarc::{stream_of, AsCudarc};
use rmm::prelude::*;

/// `add_one(unsigned* data, unsigned n)`: `data[i] += 1` for every `i < n`.
pub const ADD_ONE_PTX: &str = r#"
.version 7.0
.target sm_75
.address_size 64

.visible .entry add_one(
    .param .u64 add_one_param_0,
    .param .u32 add_one_param_1
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [add_one_param_0];
    ld.param.u32 %r2, [add_one_param_1];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r6, [%rd4];
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}
"#;

/// Copies `values` into a `DeviceVector<u32>` from `mr` on a new cudarc stream, adds one to each
/// with the PTX kernel launched by cudarc, and copies them back; also returns the device address.
///
/// # Errors
/// Any CUDA, cudarc or rmm error, as text.
pub fn add_one(
    values: &[u32],
    mr: AnyResource,
) -> Result<(Vec<u32>, usize), Box<dyn std::error::Error>> {
    let ctx: Arc<CudaContext> = CudaContext::new(0)?;
    let func = ctx
        .load_module(Ptx::from_src(ADD_ONE_PTX))?
        .load_function("add_one")?;
    let cu = ctx.new_stream()?;
    let mut v = DeviceVector::<u32>::new(values.len(), stream_of(&cu), mr)?;
    cu.memcpy_htod(values, &mut v.cudarc_view_mut(&cu))?;
    let n = u32::try_from(values.len())?;
    {
        let view = v.cudarc_view_mut(&cu);
        let mut launch = cu.launch_builder(&func);
        launch.arg(&view).arg(&n);
        // SAFETY: add_one takes (unsigned*, unsigned) and touches only the n elements of `view`.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
    }
    let mut back = vec![0u32; values.len()];
    cu.memcpy_dtoh(&v.cudarc_view(&cu), &mut back)?;
    cu.synchronize()?;
    Ok((back, v.as_ptr() as usize))
}
