// Compress and decompress block-sized inputs shaped like db_bench values
// (compression ratio 0.5): prints ns per block for each step.
use std::time::Instant;

fn corpus(blocks: usize, block_size: usize) -> Vec<Vec<u8>> {
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..blocks)
        .map(|b| {
            let mut out = Vec::with_capacity(block_size + 128);
            let mut i = 0u64;
            while out.len() < block_size {
                out.extend_from_slice(format!("{:016}", b as u64 * 1000 + i).as_bytes());
                let half: Vec<u8> = (0..50).map(|_| b' ' + (next() % 95) as u8).collect();
                out.extend_from_slice(&half);
                out.extend_from_slice(&half);
                i += 1;
            }
            out
        })
        .collect()
}

fn main() {
    let block_size: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(4096);
    let data = corpus(2048, block_size);
    let rounds = (64 << 20) / (block_size * data.len()) + 1;
    let t = Instant::now();
    let mut compressed = Vec::new();
    for _ in 0..rounds {
        compressed = data.iter().map(|d| imp::compress(d)).collect::<Vec<_>>();
    }
    let c_ns = t.elapsed().as_nanos() as f64 / (rounds * data.len()) as f64;
    let t = Instant::now();
    let mut sum = 0usize;
    for _ in 0..rounds * 4 {
        for (c, d) in compressed.iter().zip(&data) {
            let out = imp::decompress(c, d.len());
            sum += out.len();
        }
    }
    let d_ns = t.elapsed().as_nanos() as f64 / (rounds * 4 * data.len()) as f64;
    for (c, d) in compressed.iter().zip(&data) {
        assert_eq!(&imp::decompress(c, d.len()), d);
    }
    let ratio = compressed.iter().map(|c| c.len()).sum::<usize>() as f64 / data.iter().map(|d| d.len()).sum::<usize>() as f64;
    println!("{} block={} compress_ns={:.0} decompress_ns={:.0} ratio={:.3} {}", imp::NAME, block_size, c_ns, d_ns, ratio, sum % 2);
}
