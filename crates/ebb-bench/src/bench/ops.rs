//! The client-thread bodies of the benchmarks, following db_bench's
//! (`DoWrite`, `ReadRandom`, `SeekRandom`, `MixGraph`, ...). Each runs until
//! its budget is spent and leaves its figures in `w.stats`.

use std::sync::atomic::Ordering;

use crate::dist::{pareto_cdf_inversion, power_cdf_inversion, seeded_draw, KeyChooser, QueryDecider};
use crate::engine::{BatchOp, Direction, ScanStart, WriteOpts};
use crate::error::Result;
use crate::keys::{KeyFormat, KeyOrder};
use crate::stats::OpType;
use crate::workload::{MixOp, MixSpec};

use super::worker::Worker;

/// An operation of a write batch, owning its keys.
enum Owned {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

impl Owned {
    fn op(&self) -> BatchOp<'_> {
        match self {
            Owned::Put(k, v) => BatchOp::Put(k, v),
            Owned::Delete(k) => BatchOp::Delete(k),
            Owned::DeleteRange(b, e) => BatchOp::DeleteRange(b, e),
        }
    }
}

/// A range deletion of `--range_tombstone_width` key numbers from `begin`:
/// one range tombstone, or with `--expand_range_tombstones` one point delete
/// per key, as db_bench writes it.
fn range_deletion(w: &Worker<'_>, begin: u64, out: &mut Vec<Owned>) {
    let rt = &w.cfg.range_tombstones;
    if rt.expand {
        out.extend((0..rt.width).map(|i| Owned::Delete(w.keys.key(begin + i))));
    } else {
        out.push(Owned::DeleteRange(w.keys.key(begin), w.keys.key(begin + rt.width)));
    }
}

/// `DoWrite`: `count` writes (batches of `--batch_size`) of `value_size`-byte
/// values. With `--writes_per_range_tombstone`, after each write that
/// [`RangeTombstones::due`](crate::config::RangeTombstones::due) picks, a
/// range deletion joins the same batch, its begin the key generator's next
/// number (db_bench's `key_gens[id]->Next()`: the next key of fillseq, a
/// random one of fillrandom, the permutation's next of filluniquerandom).
/// As in db_bench the generator then spans `num + max_num_range_tombstones`
/// keys, and range deletions count neither as operations nor as bytes (nor
/// against the write cap).
pub fn write(
    w: &mut Worker<'_>,
    order: KeyOrder,
    count: u64,
    value_size: usize,
    timed: bool,
    wo: WriteOpts,
) -> Result<()> {
    let batch = w.cfg.batch_size as u64;
    let rt = w.cfg.range_tombstones;
    let key_space = rt.key_space(w.cfg.num);
    let mut budget = w.budget(count, timed);
    let mut seq = 0u64;
    let mut written = 0u64;
    let mut ops: Vec<Owned> = Vec::new();
    while !budget.done(batch, w.shared) {
        let bytes = batch * (w.keys.key_size() + value_size) as u64;
        if !w.before_write(bytes, batch) {
            break;
        }
        let mut next_key = |w: &mut Worker<'_>| -> u64 {
            let n = match order {
                KeyOrder::Sequential => seq,
                KeyOrder::Random => w.rng.below(key_space),
                KeyOrder::UniqueRandom => {
                    w.shared.unique_order.as_ref().map_or(seq, |o| o[(seq % o.len() as u64) as usize])
                }
            };
            seq += 1;
            n
        };
        if batch == 1 && !rt.due(written + 1) {
            let n = next_key(w);
            w.set_key(n);
            let value = w.values.generate(value_size);
            w.engine.put(&w.key, value, wo)?;
            written += 1;
        } else {
            ops.clear();
            for _ in 0..batch {
                let n = next_key(w);
                ops.push(Owned::Put(w.keys.key(n), w.values.generate(value_size).to_vec()));
                written += 1;
                if rt.due(written) {
                    let begin = next_key(w);
                    range_deletion(w, begin, &mut ops);
                    w.stats.count_range_deletion();
                }
            }
            let batch_ops: Vec<BatchOp<'_>> = ops.iter().map(Owned::op).collect();
            w.engine.write_batch(&batch_ops, wo)?;
        }
        w.stats.add_write_bytes(bytes);
        w.stats.finished_ops(batch, OpType::Write);
    }
    Ok(())
}

/// `ReadRandom` over keys `[0, range)` with keys formatted by `keys` (readmissing makes them longer).
pub fn read_random(w: &mut Worker<'_>, range: u64, keys: KeyFormat) -> Result<()> {
    let reads = w.cfg.reads_or_num();
    let mut budget = w.budget(reads, true);
    let (mut found, mut read) = (0u64, 0u64);
    while !budget.done(1, w.shared) {
        if !w.before_read(1) {
            break;
        }
        let n = w.rng.below(range);
        keys.write(n, &mut w.key);
        read += 1;
        if let Some(len) = w.engine.get_len(&w.key)? {
            found += 1;
            w.stats.add_bytes((w.key.len() + len) as u64);
        }
        w.stats.finished_ops(1, OpType::Read);
    }
    w.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// A `--readers` thread: random point reads beside a writing benchmark until
/// its own threads finish. Keys are drawn as readrandom draws them, uniform
/// over the key space the writers write into: `[0, num)`, and for `mix` the
/// keys it has inserted beyond `num` as well.
pub fn side_reader(w: &mut Worker<'_>) -> Result<()> {
    let num = w.cfg.num;
    let (mut found, mut read) = (0u64, 0u64);
    while w.before_side_read() {
        let n = w.rng.below(num + w.shared.inserted.load(Ordering::Relaxed));
        w.set_key(n);
        read += 1;
        let value = w.engine.get_len(&w.key)?;
        if let Some(len) = value {
            found += 1;
            w.stats.add_bytes((w.key.len() + len) as u64);
        }
        w.stats.finished_read(value.is_some());
    }
    w.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// `ReadSequential` / `ReadReverse`: one iterator over up to `--reads` entries.
pub fn read_sequential(w: &mut Worker<'_>, direction: Direction) -> Result<()> {
    let reads = w.cfg.reads_or_num();
    let start = if direction == Direction::Forward { ScanStart::First } else { ScanStart::Last };
    let engine = w.engine;
    let shared = w.shared;
    let stats = &mut w.stats;
    let read_limiter = shared.read_limiter.as_ref();
    engine.scan(start, direction, reads, &mut |k, v| {
        if shared.abort.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(l) = read_limiter {
            if !l.acquire(1, &crate::limiter::Stop { deadline: None, flag: Some(&shared.abort) }) {
                return false;
            }
            stats.reset_last_op_time();
        }
        stats.add_bytes((k.len() + v.len()) as u64);
        stats.finished_ops(1, OpType::Read);
        true
    })?;
    Ok(())
}

/// `SeekRandom`: seek to a random key, then `--seek_nexts` steps, as
/// db_bench's loop does: a seek counts as found when the iterator is valid
/// at the seek key itself (`iter->Valid() && iter->key() == key`), so a
/// seek that ends past the prefix (`--prefix_same_as_start`: the iterator
/// is invalid there) or on a later key is not; then up to `--seek_nexts`
/// entries are read (their bytes counted), each followed by a step, until
/// the iterator ends.
pub fn seek_random(w: &mut Worker<'_>) -> Result<()> {
    let reads = w.cfg.reads_or_num();
    let num = w.cfg.num;
    let direction = if w.cfg.reverse_iterator { Direction::Backward } else { Direction::Forward };
    let seek_nexts = w.cfg.seek_nexts as u64;
    let mut budget = w.budget(reads, true);
    let (mut found, mut read) = (0u64, 0u64);
    while !budget.done(1, w.shared) {
        if !w.before_read(1) {
            break;
        }
        let n = w.rng.below(num);
        w.set_key(n);
        read += 1;
        let target = w.key.clone();
        let mut first = true;
        let (mut visited, mut bytes) = (0u64, 0u64);
        // The seek's own entry is visited even with --seek_nexts=0, for the
        // found test; returning false there stops the scan before a step.
        w.engine.scan(ScanStart::At(&target), direction, seek_nexts.max(1), &mut |k, v| {
            if first && k == target.as_slice() {
                found += 1;
            }
            first = false;
            if visited == seek_nexts {
                return false;
            }
            visited += 1;
            bytes += (k.len() + v.len()) as u64;
            true
        })?;
        w.stats.add_bytes(bytes);
        w.stats.finished_ops(1, OpType::Seek);
    }
    w.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// `MultiReadRandom`: `--batch_size` random keys per multiget.
pub fn multi_read_random(w: &mut Worker<'_>) -> Result<()> {
    let reads = w.cfg.reads_or_num();
    let batch = w.cfg.batch_size as u64;
    let num = w.cfg.num;
    let mut budget = w.budget(reads, true);
    let (mut found, mut read) = (0u64, 0u64);
    while !budget.done(batch, w.shared) {
        if !w.before_read(batch) {
            break;
        }
        let keys: Vec<Vec<u8>> = (0..batch).map(|_| w.keys.key(w.rng.below(num))).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let values = w.engine.multi_get(&refs)?;
        read += batch;
        for (k, v) in keys.iter().zip(values) {
            if let Some(v) = v {
                found += 1;
                w.stats.add_bytes((k.len() + v.len()) as u64);
            }
        }
        w.stats.finished_ops(batch, OpType::Read);
    }
    w.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

/// `DoDelete`: `--deletes` deletes in batches, sequential or random.
pub fn delete(w: &mut Worker<'_>, sequential: bool) -> Result<()> {
    let deletes = w.cfg.deletes.unwrap_or(w.cfg.num);
    let batch = w.cfg.batch_size as u64;
    let num = w.cfg.num;
    let wo = w.write_opts();
    let mut budget = w.budget(deletes, !sequential);
    let mut i = 0u64;
    while !budget.done(batch, w.shared) {
        if !w.before_write(batch * w.keys.key_size() as u64, batch) {
            break;
        }
        let keys: Vec<Vec<u8>> =
            (0..batch).map(|j| w.keys.key(if sequential { i + j } else { w.rng.below(num) })).collect();
        if batch == 1 {
            w.engine.delete(&keys[0], wo)?;
        } else {
            let ops: Vec<BatchOp<'_>> = keys.iter().map(|k| BatchOp::Delete(k)).collect();
            w.engine.write_batch(&ops, wo)?;
        }
        i += batch;
        w.stats.finished_ops(batch, OpType::Delete);
    }
    Ok(())
}

/// readwhilewriting's writer (`BGWriter`): random puts until the readers
/// finish. With `--writes_per_range_tombstone`, after each write that
/// [`RangeTombstones::due`](crate::config::RangeTombstones::due) picks, a
/// range deletion of its own (db_bench's `DB::DeleteRange`, or the point
/// deletes one by one) from a random key number in `[0, num)`, counted as
/// one more write operation of this (unreported) thread.
pub fn background_writer(w: &mut Worker<'_>) -> Result<()> {
    w.stats.exclude_from_merge();
    let num = w.cfg.num;
    let value_size = w.cfg.value_size;
    let rt = w.cfg.range_tombstones;
    let wo = w.write_opts();
    let mut written = 0u64;
    while !w.shared.writer_stop.load(Ordering::Relaxed) && !w.shared.abort.load(Ordering::Relaxed) {
        let bytes = (w.keys.key_size() + value_size) as u64;
        if !w.before_write(bytes, 1) {
            break;
        }
        let n = w.rng.below(num);
        w.set_key(n);
        let value = w.values.generate(value_size);
        w.engine.put(&w.key, value, wo)?;
        w.stats.add_write_bytes(bytes);
        w.stats.finished_ops(1, OpType::Write);
        written += 1;
        if rt.due(written) {
            let begin = w.rng.below(num);
            if rt.expand {
                for i in 0..rt.width {
                    w.set_key(begin + i);
                    w.engine.delete(&w.key, wo)?;
                }
            } else {
                let (b, e) = (w.keys.key(begin), w.keys.key(begin + rt.width));
                w.engine.delete_range(&b, &e, wo)?;
            }
            w.stats.count_range_deletion();
            w.stats.finished_ops(1, OpType::Write);
        }
    }
    Ok(())
}

/// `ReadRandomWriteRandom`: per 100 operations, `--readwritepercent` reads then the rest writes.
pub fn read_random_write_random(w: &mut Worker<'_>) -> Result<()> {
    let total = w.cfg.readwrites();
    let num = w.cfg.num;
    let value_size = w.cfg.value_size;
    let wo = w.write_opts();
    let mut budget = w.budget(total, true);
    let (mut get_weight, mut put_weight) = (0u32, 0u32);
    let (mut reads, mut writes, mut found) = (0u64, 0u64, 0u64);
    while !budget.done(1, w.shared) {
        let n = w.rng.below(num);
        w.set_key(n);
        if get_weight == 0 && put_weight == 0 {
            get_weight = w.cfg.readwritepercent;
            put_weight = 100 - get_weight;
        }
        if get_weight > 0 {
            if !w.before_read(1) {
                break;
            }
            if w.engine.get_len(&w.key)?.is_some() {
                found += 1;
            }
            get_weight -= 1;
            reads += 1;
            w.stats.finished_ops(1, OpType::Read);
        } else if put_weight > 0 {
            let bytes = (w.key.len() + value_size) as u64;
            if !w.before_write(bytes, 1) {
                break;
            }
            let value = w.values.generate(value_size);
            w.engine.put(&w.key, value, wo)?;
            w.stats.add_write_bytes(bytes);
            put_weight -= 1;
            writes += 1;
            w.stats.finished_ops(1, OpType::Write);
        }
    }
    w.stats.add_message(&format!("( reads:{reads} writes:{writes} total:{total} found:{found})"));
    Ok(())
}

/// `UpdateRandom`: read a random key, write it back with a new value.
pub fn update_random(w: &mut Worker<'_>) -> Result<()> {
    let total = w.cfg.readwrites();
    let num = w.cfg.num;
    let value_size = w.cfg.value_size;
    let wo = w.write_opts();
    let mut budget = w.budget(total, true);
    let (mut updates, mut found) = (0u64, 0u64);
    while !budget.done(1, w.shared) {
        let n = w.rng.below(num);
        w.set_key(n);
        let bytes = (w.key.len() + value_size) as u64;
        if !w.before_write(bytes, 1) {
            break;
        }
        if let Some(len) = w.engine.get_len(&w.key)? {
            found += 1;
            w.stats.add_bytes((w.key.len() + len) as u64);
        }
        let value = w.values.generate(value_size);
        w.engine.put(&w.key, value, wo)?;
        w.stats.add_write_bytes(bytes);
        updates += 1;
        w.stats.finished_ops(1, OpType::Update);
    }
    w.stats.add_message(&format!("( updates:{updates} found:{found})"));
    Ok(())
}

/// `MergeRandom`: `readwrites` merges (db_bench's `readwrites_`), each of a
/// `--value_size`-byte value from the value generator into a random key
/// among `--merge_keys`. The operand is what db_bench sends whatever the
/// operator: with `uint64add` only `--value_size=8` makes it a number (RocksDB
/// and Ebb read an operand of another size as 0).
pub fn merge_random(w: &mut Worker<'_>) -> Result<()> {
    let total = w.cfg.readwrites();
    let keys = w.cfg.merge_keys;
    // db_bench's `GenerateKeyFromInt(n, merge_keys_)`: prefixes among --merge_keys.
    let format = w.keys.for_num_keys(keys);
    let value_size = w.cfg.value_size;
    let wo = w.write_opts();
    let mut budget = w.budget(total, true);
    while !budget.done(1, w.shared) {
        let n = w.rng.below(keys);
        format.write(n, &mut w.key);
        let bytes = (w.key.len() + value_size) as u64;
        if !w.before_write(bytes, 1) {
            break;
        }
        let value = w.values.generate(value_size);
        w.engine.merge(&w.key, value, wo)?;
        w.stats.add_write_bytes(bytes);
        w.stats.finished_ops(1, OpType::Merge);
    }
    w.stats.add_message(&format!("( updates:{total})"));
    Ok(())
}

/// `ReadRandomMergeRandom`: `readwrites` operations on random keys among
/// `--merge_keys`, each a merge (as in [`merge_random`]) with probability
/// `--mergereadpercent` percent, else a get. As in db_bench the key is drawn
/// before the coin, and no bytes are reported (no MB/s); the merges still
/// count in the live ingest figure.
pub fn read_random_merge_random(w: &mut Worker<'_>) -> Result<()> {
    let total = w.cfg.readwrites();
    let keys = w.cfg.merge_keys;
    let format = w.keys.for_num_keys(keys);
    let percent = u64::from(w.cfg.mergereadpercent);
    let value_size = w.cfg.value_size;
    let wo = w.write_opts();
    let mut budget = w.budget(total, true);
    let (mut gets, mut merges, mut hits, mut max_length) = (0u64, 0u64, 0u64, 0usize);
    while !budget.done(1, w.shared) {
        let n = w.rng.below(keys);
        format.write(n, &mut w.key);
        if w.rng.below(100) < percent {
            let bytes = (w.key.len() + value_size) as u64;
            if !w.before_write(bytes, 1) {
                break;
            }
            let value = w.values.generate(value_size);
            w.engine.merge(&w.key, value, wo)?;
            w.stats.count_written(bytes);
            merges += 1;
            w.stats.finished_ops(1, OpType::Merge);
        } else {
            if !w.before_read(1) {
                break;
            }
            if let Some(len) = w.engine.get_len(&w.key)? {
                hits += 1;
                max_length = max_length.max(len);
            }
            gets += 1;
            w.stats.finished_ops(1, OpType::Read);
        }
    }
    w.stats.add_message(&format!("(reads:{gets} merges:{merges} total:{total} hits:{hits} maxlength:{max_length})"));
    Ok(())
}

/// `MixGraph` (Cao et al., FAST'20), as db_bench implements it: one random
/// number in `[0, num)` per query picks the key (uniform, power-law, or by
/// key-range hotness), the query type (by `rand % 1000` slots, db_bench's
/// coupling of type to key kept as is), the Put value size (generalized
/// Pareto) and the Seek scan length (generalized Pareto).
pub fn mixgraph(w: &mut Worker<'_>) -> Result<()> {
    let p = w.cfg.mixgraph.clone();
    let num = w.cfg.num as i64;
    let query = QueryDecider::new(&[p.get_ratio, p.put_ratio, p.seek_ratio])?;
    let use_random_modeling = p.key_dist_a == 0.0 || p.key_dist_b == 0.0;
    let value_max = p.max_value_size.min(1 << 20);
    let wo = w.write_opts();
    let reads = w.cfg.reads_or_num();
    let mut budget = w.budget(reads, true);
    let (mut gets, mut puts, mut seeks, mut get_found, mut seek_found) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut total_val_size, mut total_scan_length) = (0f64, 0f64);
    while !budget.done(1, w.shared) {
        let ini_rand = w.rng.below(num as u64) as i64;
        let rand_v = ini_rand % num;
        let u = rand_v as f64 / num as f64;
        let key_rand = if use_random_modeling {
            ini_rand
        } else if let Some(ranges) = &w.shared.key_ranges {
            ranges.key_id(ini_rand, p.key_dist_a, p.key_dist_b)
        } else {
            let key_seed = power_cdf_inversion(u, p.key_dist_a, p.key_dist_b);
            (seeded_draw(key_seed) % num as u64) as i64
        };
        w.set_key(key_rand as u64);
        match query.query_type(rand_v) {
            0 => {
                if !w.before_read(1) {
                    break;
                }
                gets += 1;
                if let Some(len) = w.engine.get_len(&w.key)? {
                    get_found += 1;
                    w.stats.add_bytes((w.key.len() + len) as u64);
                }
                w.stats.finished_ops(1, OpType::Read);
            }
            1 => {
                let mut val_size = pareto_cdf_inversion(u, p.value_theta, p.value_k, p.value_sigma);
                if val_size < 10 {
                    val_size = 10;
                } else if val_size > value_max {
                    val_size %= value_max;
                }
                let bytes = (w.key.len() as i64 + val_size) as u64;
                if !w.before_write(bytes, 1) {
                    break;
                }
                puts += 1;
                total_val_size += val_size as f64;
                let value = w.values.generate(val_size as usize);
                w.engine.put(&w.key, value, wo)?;
                w.stats.count_written(bytes);
                w.stats.finished_ops(1, OpType::Write);
            }
            _ => {
                if !w.before_read(1) {
                    break;
                }
                seeks += 1;
                let scan_length =
                    pareto_cdf_inversion(u, p.iter_theta, p.iter_k, p.iter_sigma).rem_euclid(p.max_scan_len) as u64;
                let target = w.key.clone();
                let mut first = true;
                let mut visited = 0u64;
                let mut bytes = 0u64;
                w.engine.scan(ScanStart::At(&target), Direction::Forward, scan_length.max(1), &mut |k, v| {
                    if first && k == target.as_slice() {
                        seek_found += 1;
                    }
                    first = false;
                    if visited < scan_length {
                        visited += 1;
                        bytes += (k.len() + v.len()) as u64;
                    }
                    true
                })?;
                total_scan_length += visited as f64;
                w.stats.add_bytes(bytes);
                w.stats.finished_ops(1, OpType::Seek);
            }
        }
    }
    w.stats.add_message(&format!(
        "( Gets:{gets} Puts:{puts} Seek:{seeks}, reads {} in {} found, avg size: {:.1} value, {:.1} scan)",
        get_found + seek_found,
        gets + seeks,
        total_val_size / puts as f64,
        total_scan_length / seeks as f64
    ));
    Ok(())
}

/// The custom mix (Manos): operations drawn by share, keys by the chosen distribution.
pub fn mix(w: &mut Worker<'_>, spec: &MixSpec) -> Result<()> {
    let num = w.cfg.num;
    let chooser = KeyChooser::from_name(
        &spec.key_distribution,
        num,
        spec.zipf_theta,
        spec.hotspot_fraction,
        spec.hotspot_ops_fraction,
    )?;
    let value_size = w.cfg.value_size;
    let wo = w.write_opts();
    let reads = w.cfg.reads_or_num();
    let mut budget = w.budget(reads, true);
    let mut counts = [0u64; 5];
    let mut found = 0u64;
    while !budget.done(1, w.shared) {
        let op = spec.pick(w.rng.next_f64());
        let keys_now = num + w.shared.inserted.load(Ordering::Relaxed);
        match op {
            MixOp::PointRead | MixOp::RangeScan => {
                if !w.before_read(1) {
                    break;
                }
                let n = chooser.next(&mut w.rng, keys_now);
                w.set_key(n);
                if op == MixOp::PointRead {
                    counts[0] += 1;
                    if let Some(len) = w.engine.get_len(&w.key)? {
                        found += 1;
                        w.stats.add_bytes((w.key.len() + len) as u64);
                    }
                    w.stats.finished_ops(1, OpType::Read);
                } else {
                    counts[1] += 1;
                    let target = w.key.clone();
                    let mut bytes = 0u64;
                    w.engine.scan(ScanStart::At(&target), Direction::Forward, spec.scan_length, &mut |k, v| {
                        bytes += (k.len() + v.len()) as u64;
                        true
                    })?;
                    w.stats.add_bytes(bytes);
                    w.stats.finished_ops(1, OpType::Seek);
                }
            }
            MixOp::Insert | MixOp::Update => {
                let bytes = (w.keys.key_size() + value_size) as u64;
                if !w.before_write(bytes, 1) {
                    break;
                }
                let n = if op == MixOp::Insert {
                    counts[2] += 1;
                    num + w.shared.inserted.fetch_add(1, Ordering::Relaxed)
                } else {
                    counts[3] += 1;
                    chooser.next(&mut w.rng, keys_now)
                };
                w.set_key(n);
                let value = w.values.generate(value_size);
                w.engine.put(&w.key, value, wo)?;
                w.stats.add_write_bytes(bytes);
                w.stats.finished_ops(1, OpType::Write);
            }
            MixOp::Delete => {
                if !w.before_write(w.keys.key_size() as u64, 1) {
                    break;
                }
                counts[4] += 1;
                let n = chooser.next(&mut w.rng, keys_now);
                w.set_key(n);
                w.engine.delete(&w.key, wo)?;
                w.stats.finished_ops(1, OpType::Delete);
            }
        }
    }
    w.stats.add_message(&format!(
        "( reads:{} scans:{} inserts:{} updates:{} deletes:{} found:{found})",
        counts[0], counts[1], counts[2], counts[3], counts[4]
    ));
    Ok(())
}

/// db_bench's `Crc32c` and `xxh3` micro-benchmarks: 500 MB in `--block_size` blocks.
pub fn checksum(w: &mut Worker<'_>, xxh3: bool) -> Result<()> {
    let size = w.cfg.block_size;
    let data = vec![b'x'; size];
    let mut bytes = 0u64;
    let mut acc = 0u64;
    while bytes < 500 * 1048576 && !w.shared.abort.load(Ordering::Relaxed) {
        if xxh3 {
            acc ^= xxhash_rust::xxh3::xxh3_64(&data);
            w.stats.finished_ops(1, OpType::Hash);
        } else {
            acc ^= u64::from(crc32c::crc32c(&data));
            w.stats.finished_ops(1, OpType::Crc);
        }
        bytes += size as u64;
    }
    std::hint::black_box(acc);
    w.stats.add_bytes(bytes);
    w.stats.add_message(&format!("({size} per op)"));
    Ok(())
}
