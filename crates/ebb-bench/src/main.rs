//! The ebb-bench binary: see `ebb-bench --help`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = ebb_bench::cli::run(args) {
        eprintln!("ebb-bench: {e}");
        std::process::exit(1);
    }
}
