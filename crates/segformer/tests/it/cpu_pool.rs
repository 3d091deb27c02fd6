//! `segformer::on_cpu_pool`: where a model's forward passes are driven from.

use burn::backend::{Autodiff, Flex, Wgpu};

/// A burn-flex model (inference or training) is driven from a thread of rayon's global pool,
/// the one its kernels split their work on; another backend's stays on the calling thread.
#[test]
fn flex_models_are_driven_from_the_kernels_pool_and_others_inline() {
    let caller = std::thread::current().id();
    assert_eq!(rayon::current_thread_index(), None, "the test's own thread");
    for on_pool in [
        segformer::on_cpu_pool::<Flex, _>(rayon::current_thread_index),
        segformer::on_cpu_pool::<Autodiff<Flex>, _>(rayon::current_thread_index),
    ] {
        let index = on_pool.expect("a thread of rayon's global pool");
        assert!(index < rayon::current_num_threads(), "{index}");
    }
    let (index, thread) = segformer::on_cpu_pool::<Wgpu, _>(|| {
        (rayon::current_thread_index(), std::thread::current().id())
    });
    assert_eq!(
        (index, thread),
        (None, caller),
        "burn-wgpu runs where it is called"
    );
}
