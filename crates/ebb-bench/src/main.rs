//! The ebb-bench binary: see `ebb-bench --help`.

/// With the `mimalloc` feature, mimalloc serves every Rust allocation of the
/// process (Ebb's blocks, memtables, buffers); the C library's malloc
/// otherwise.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = ebb_bench::cli::run(args) {
        eprintln!("ebb-bench: {e}");
        std::process::exit(1);
    }
}
