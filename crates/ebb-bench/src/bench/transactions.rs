//! The transaction benchmarks' client-thread bodies and their checks.
//!
//! - `randomtransaction` is db_bench's (`Benchmark::RandomTransaction` over
//!   `RandomTransactionInserter::DoInsert`, test_util/transaction_test_util.cc,
//!   RocksDB 10.4): each transaction draws one amount and adds it to a random
//!   key in each of `--transaction_sets` sets, so every set sums to the same
//!   total; [`verify_sets`] checks that at the end (`RandomTransactionInserter::Verify`).
//! - `transfertransaction` (not in db_bench) moves a random amount between
//!   two random accounts of `--transfer_accounts`; [`check_accounts`]
//!   checks that the total is what [`open_accounts`] found before.
//!
//! A transaction that fails with one of the outcomes RocksDB's callers expect
//! (`Busy`, `Deadlock`, `TimedOut`, `TryAgain`, `Expired`) is rolled back and
//! counted, and the thread goes on to its next one, as db_bench does (no
//! retry): every transaction begun is one operation. Any other failure stops
//! the benchmark, as do those db_bench treats as impossible (a write that
//! fails after its key was read for update, a failed prepare).

use std::time::Duration;

use crate::bail;
use crate::engine::transaction::{Transaction, TransactionDb, TransactionDbKind, TransactionError, TransactionOpts};
use crate::engine::{BatchOp, Engine, ScanStart};
use crate::error::{BenchError, Result};
use crate::rng::Rng64;
use crate::stats::{OpType, TransactionCounts};

use super::worker::Worker;

/// How a transaction that ran into trouble ends: counted, or the benchmark
/// stops.
enum Abort {
    /// An outcome the benchmark counts and goes on from.
    Counted(TransactionError),
    /// The benchmark stops.
    Fatal(BenchError),
}

/// Sorts a transaction call's failure: the five outcomes are counted, the
/// rest stops the benchmark with `what` in its message.
fn sort(e: TransactionError, what: &str) -> Abort {
    match e {
        TransactionError::Other(e) => Abort::Fatal(e.context(what)),
        counted => Abort::Counted(counted),
    }
}

/// A failure db_bench treats as impossible (it asserts, or aborts with
/// "unexpected error"): the benchmark stops.
fn unexpected(e: TransactionError, what: &str) -> Abort {
    Abort::Fatal(e.into_bench_error(&format!("{what} returned an unexpected error")))
}

/// The options each transaction begins with: a snapshot when
/// `--transaction_set_snapshot` or `always_snapshot` says so.
fn transaction_options(w: &Worker<'_>, always_snapshot: bool) -> TransactionOpts {
    let t = &w.cfg.transactions;
    TransactionOpts {
        set_snapshot: t.set_snapshot || always_snapshot,
        lock_timeout_ms: t.lock_timeout_ms,
        deadlock_detect: t.deadlock_detect,
    }
}

/// `--transaction_sleep`: a random pause below the bound between a read and
/// its write, as db_bench's RandomTransaction slept before 2016 (its flag is
/// still declared, and unused since).
fn pause(rng: &mut Rng64, bound_micros: u64) {
    if bound_micros > 0 {
        std::thread::sleep(Duration::from_micros(rng.below(bound_micros)));
    }
}

/// db_bench's key of number `n` in set `set` (counted from 0): the set + 1
/// in four digits, then `n` in decimal (`"%.4u"` and `std::to_string`).
pub fn set_key(set: u16, n: u64) -> Vec<u8> {
    format!("{:04}{n}", u32::from(set) + 1).into_bytes()
}

/// A set member's value: a decimal number, never 0 or `u64::MAX` (db_bench's
/// check: a value is written only as a sum of positive amounts).
fn parse_set_value(value: &[u8], where_: &str) -> Result<u64> {
    let n = std::str::from_utf8(value).ok().and_then(|t| t.parse::<u64>().ok());
    match n {
        Some(n) if n != 0 && n != u64::MAX => Ok(n),
        _ => bail!("{where_} returned unexpected value: {:?}", String::from_utf8_lossy(value)),
    }
}

/// Fisher-Yates, for the order the sets are visited in (db_bench's
/// `RandomShuffle`), so that concurrent transactions lock them in different
/// orders.
fn shuffle(sets: &mut [u16], rng: &mut Rng64) {
    for i in (1..sets.len()).rev() {
        sets.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// `RandomTransaction`: `readwrites` transactions (or `--duration`), each
/// db_bench's `DoInsert`: draw an amount in 1..=100, then for each set in a
/// shuffled order read a random key of `[0, num)` (with `GetForUpdate` one
/// time in two, else `Get`), delete it and put its value plus the amount.
/// Pessimistic transactions are named and, 9 in 10, prepared before they
/// commit. 1 in 20 rolls back instead of committing. Without a transaction
/// database, the reads are plain and the puts go in one write batch.
pub fn random_transaction(w: &mut Worker<'_>) -> Result<()> {
    let total = w.cfg.readwrites();
    let mut sets: Vec<u16> = (0..w.cfg.transactions.sets).collect();
    let mut budget = w.budget(total, true);
    let mut counts = TransactionCounts::default();
    let mut name_seq = 0u64;
    let txn_db = w.engine.transactions();
    while !budget.done(1, w.shared) {
        let amount = w.rng.below(100) + 1;
        shuffle(&mut sets, &mut w.rng);
        counts.attempts += 1;
        match txn_db {
            None => insert_batch(w, &sets, amount)?,
            Some(db) => {
                name_seq += 1;
                let name = format!("txn{}-{name_seq}", w.tid);
                match insert_transaction(w, db, &sets, amount, name.as_bytes(), &mut counts) {
                    Ok(()) => {}
                    Err(Abort::Counted(e)) => counts.count_failure(&e),
                    Err(Abort::Fatal(e)) => return Err(e),
                }
            }
        }
        w.stats.finished_ops(1, OpType::Other);
    }
    w.stats.transactions = counts;
    Ok(())
}

/// `DoInsert` without a transaction (`DBInsert`): plain reads, one batch.
fn insert_batch(w: &mut Worker<'_>, sets: &[u16], amount: u64) -> Result<()> {
    let mut puts = Vec::with_capacity(sets.len());
    for &set in sets {
        let key = set_key(set, w.rng.below(w.cfg.num));
        let value = match w.engine.get(&key)? {
            Some(v) => parse_set_value(&v, "Get")?,
            None => 0,
        };
        let sum = (value + amount).to_string().into_bytes();
        w.stats.add_write_bytes((key.len() + sum.len()) as u64);
        puts.push((key, sum));
    }
    let ops: Vec<BatchOp<'_>> = puts.iter().map(|(k, v)| BatchOp::Put(k, v)).collect();
    w.engine.write_batch(&ops, w.write_opts())
}

/// `DoInsert` in a transaction. `Ok` when it committed or rolled back by
/// choice (counted here); a counted failure has been rolled back.
fn insert_transaction(
    w: &mut Worker<'_>,
    db: &dyn TransactionDb,
    sets: &[u16],
    amount: u64,
    name: &[u8],
    counts: &mut TransactionCounts,
) -> std::result::Result<(), Abort> {
    let pessimistic = db.kind() == TransactionDbKind::Pessimistic;
    // Every transaction has a snapshot. A pessimistic one, as db_bench's
    // inserter takes one (`SetSnapshot`) when `--transaction_set_snapshot`
    // did not. An optimistic one, as RocksDB's own stress test of the
    // inserter begins them (`OptimisticTransactionStressTest`), where
    // db_bench begins them without: a key read with `Get` is tracked only
    // from its `Delete` on, so a commit by another in between is not seen
    // as a conflict, an increment is lost, and the sets' sums part (seen on
    // both engines with 4 threads on 100 keys).
    let mut txn = db.begin(w.write_opts(), &transaction_options(w, true));
    if pessimistic {
        txn.set_name(name).map_err(|e| unexpected(e, "SetName"))?;
    }
    if let Err(abort) = increment_sets(w, txn.as_mut(), sets, amount, pessimistic) {
        txn.rollback().map_err(|e| unexpected(e, "Rollback"))?;
        return Err(abort);
    }
    let with_prepare = pessimistic && w.rng.below(10) != 0;
    if with_prepare {
        txn.prepare().map_err(|e| unexpected(e, "Prepare"))?;
    }
    if w.rng.below(20) == 0 {
        txn.rollback().map_err(|e| unexpected(e, "Rollback"))?;
        counts.rolled_back += 1;
        return Ok(());
    }
    match txn.commit() {
        Ok(()) => {
            counts.committed += 1;
            counts.prepared += u64::from(with_prepare);
            Ok(())
        }
        // A pessimistic transaction holds its locks, so its commit fails
        // only once it expired (db_bench's check).
        Err(TransactionError::Expired) if pessimistic => Err(Abort::Counted(TransactionError::Expired)),
        Err(e) if pessimistic => Err(unexpected(e, "Commit")),
        Err(e) => Err(sort(e, "Commit")),
    }
}

/// The reads and writes of one `DoInsert` transaction.
fn increment_sets(
    w: &mut Worker<'_>,
    txn: &mut dyn Transaction,
    sets: &[u16],
    amount: u64,
    pessimistic: bool,
) -> std::result::Result<(), Abort> {
    for &set in sets {
        let key = set_key(set, w.rng.below(w.cfg.num));
        let for_update = w.rng.below(2) == 0;
        let read = if for_update { txn.get_for_update(&key) } else { txn.get(&key) };
        let value = match read {
            Ok(Some(v)) => parse_set_value(&v, "Get").map_err(Abort::Fatal)?,
            Ok(None) => 0,
            // An optimistic transaction's reads take no lock and cannot fail.
            Err(e) if !pessimistic => return Err(unexpected(e, "Get")),
            Err(e) => return Err(sort(e, if for_update { "GetForUpdate" } else { "Get" })),
        };
        pause(&mut w.rng, w.cfg.transactions.sleep_micros);
        let sum = (value + amount).to_string().into_bytes();
        // db_bench deletes first (a SingleDelete for 3 sets in 4, which the
        // rocksdb crate's transactions do not have: a Delete on both engines).
        match txn.delete(&key) {
            Ok(()) => {}
            // Read without a lock: locking it now may meet another's.
            Err(e) if !for_update && !matches!(e, TransactionError::Other(_)) => return Err(Abort::Counted(e)),
            Err(e) => return Err(unexpected(e, "Delete")),
        }
        txn.put(&key, &sum).map_err(|e| unexpected(e, "Put"))?;
        w.stats.add_write_bytes((key.len() + sum.len()) as u64);
    }
    Ok(())
}

/// `RandomTransactionInserter::Verify`: each set's values, read with an
/// iterator over the set's prefix, sum to the same total. Returns that total.
pub fn verify_sets(engine: &dyn Engine, sets: u16) -> Result<u128> {
    let mut first: Option<(u16, u128)> = None;
    for set in 0..sets {
        let prefix = format!("{:04}", u32::from(set) + 1).into_bytes();
        let mut total = 0u128;
        let mut bad = None;
        engine.scan(ScanStart::At(&prefix), crate::engine::Direction::Forward, u64::MAX, &mut |k, v| {
            if !k.starts_with(&prefix) {
                return false;
            }
            match parse_set_value(v, "Iter") {
                Ok(n) => total += u128::from(n),
                Err(e) => bad = Some(e),
            }
            bad.is_none()
        })?;
        if let Some(e) = bad {
            return Err(e);
        }
        match first {
            None => first = Some((set, total)),
            Some((i, t)) if t != total => bail!(
                "RandomTransactionVerify found inconsistent totals: Set[{i}]: {t}, Set[{set}]: {total} (each \
                 transaction added one amount to every set, so the sets' sums must be equal)"
            ),
            Some(_) => {}
        }
    }
    Ok(first.map_or(0, |(_, t)| t))
}

/// The starting balance of an account transfertransaction creates.
pub const INITIAL_BALANCE: i64 = 1000;

/// The key of account `n`: 16 bytes, apart from db_bench's key formats.
pub fn account_key(n: u64) -> Vec<u8> {
    format!("acct{n:012}").into_bytes()
}

fn parse_balance(value: &[u8], account: u64) -> Result<i64> {
    std::str::from_utf8(value).ok().and_then(|t| t.parse::<i64>().ok()).ok_or_else(|| {
        BenchError::new(format!("account {account} holds {:?}, which is not a balance", String::from_utf8_lossy(value)))
    })
}

/// The balances of accounts `[0, accounts)` now, in order; a missing
/// account is `None`.
fn balances(engine: &dyn Engine, accounts: u64) -> Result<Vec<Option<i64>>> {
    (0..accounts).map(|n| engine.get(&account_key(n))?.map(|v| parse_balance(&v, n)).transpose()).collect()
}

/// Before transfertransaction: creates the accounts that are missing with
/// [`INITIAL_BALANCE`] (one batch) and returns the total of all of them,
/// which the transfers must keep.
pub fn open_accounts(engine: &dyn Engine, accounts: u64) -> Result<i128> {
    let now = balances(engine, accounts)?;
    let missing: Vec<(Vec<u8>, Vec<u8>)> = now
        .iter()
        .enumerate()
        .filter(|(_, b)| b.is_none())
        .map(|(n, _)| (account_key(n as u64), INITIAL_BALANCE.to_string().into_bytes()))
        .collect();
    if !missing.is_empty() {
        let ops: Vec<BatchOp<'_>> = missing.iter().map(|(k, v)| BatchOp::Put(k, v)).collect();
        engine.write_batch(&ops, Default::default())?;
    }
    Ok(now.iter().map(|b| i128::from(b.unwrap_or(INITIAL_BALANCE))).sum())
}

/// After transfertransaction: every account is there and the total is
/// `expected`.
pub fn check_accounts(engine: &dyn Engine, accounts: u64, expected: i128) -> Result<()> {
    let now = balances(engine, accounts)?;
    if let Some(n) = now.iter().position(Option::is_none) {
        bail!("TransferTransactionVerify FAILED: account {n} is missing");
    }
    let total: i128 = now.iter().map(|b| i128::from(b.unwrap_or(0))).sum();
    if total != expected {
        bail!(
            "TransferTransactionVerify FAILED: the {accounts} accounts hold {total} in total, and held {expected} \
             before the transfers (a transfer moves money, it never makes or loses any)"
        );
    }
    Ok(())
}

/// transfertransaction: `readwrites` transfers (or `--duration`), each a
/// transaction that reads two distinct random accounts with `GetForUpdate`
/// (in the order drawn, so two transfers may lock the same pair in opposite
/// orders), puts the first's balance less a random amount in 1..=100 and
/// the second's plus it, and commits.
pub fn transfer_transaction(w: &mut Worker<'_>) -> Result<()> {
    let Some(db) = w.engine.transactions() else {
        bail!("transfertransaction needs a transaction database (--transaction_db or --optimistic_transaction_db)");
    };
    let accounts = w.cfg.transactions.transfer_accounts;
    let options = transaction_options(w, false);
    let mut budget = w.budget(w.cfg.readwrites(), true);
    let mut counts = TransactionCounts::default();
    while !budget.done(1, w.shared) {
        let from = w.rng.below(accounts);
        let to = {
            let n = w.rng.below(accounts - 1);
            if n >= from {
                n + 1
            } else {
                n
            }
        };
        let amount = w.rng.below(100) as i64 + 1;
        counts.attempts += 1;
        let mut txn = db.begin(w.write_opts(), &options);
        match transfer(w, txn.as_mut(), from, to, amount) {
            Ok(()) => match txn.commit() {
                Ok(()) => counts.committed += 1,
                Err(e) => match sort(e, "Commit") {
                    Abort::Counted(e) => counts.count_failure(&e),
                    Abort::Fatal(e) => return Err(e),
                },
            },
            Err(abort) => {
                txn.rollback().map_err(|e| e.into_bench_error("Rollback"))?;
                match abort {
                    Abort::Counted(e) => counts.count_failure(&e),
                    Abort::Fatal(e) => return Err(e),
                }
            }
        }
        w.stats.finished_ops(1, OpType::Other);
    }
    w.stats.transactions = counts;
    Ok(())
}

/// One transfer's reads and writes.
fn transfer(
    w: &mut Worker<'_>,
    txn: &mut dyn Transaction,
    from: u64,
    to: u64,
    amount: i64,
) -> std::result::Result<(), Abort> {
    let read = |txn: &mut dyn Transaction, n: u64| -> std::result::Result<(Vec<u8>, i64), Abort> {
        let key = account_key(n);
        match txn.get_for_update(&key) {
            Ok(Some(v)) => Ok((key, parse_balance(&v, n).map_err(Abort::Fatal)?)),
            Ok(None) => Err(Abort::Fatal(BenchError::new(format!("account {n} is missing")))),
            Err(e) => Err(sort(e, "GetForUpdate")),
        }
    };
    let (from_key, from_balance) = read(txn, from)?;
    let (to_key, to_balance) = read(txn, to)?;
    pause(&mut w.rng, w.cfg.transactions.sleep_micros);
    for (key, balance) in [(from_key, from_balance - amount), (to_key, to_balance + amount)] {
        let value = balance.to_string().into_bytes();
        // Both keys are held (locked, or tracked) since their reads.
        txn.put(&key, &value).map_err(|e| unexpected(e, "Put"))?;
        w.stats.add_write_bytes((key.len() + value.len()) as u64);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_db_bench_s() {
        assert_eq!(set_key(0, 42), b"000142");
        assert_eq!(set_key(9998, 0), b"99990");
        assert_eq!(account_key(7), b"acct000000000007");
    }

    #[test]
    fn set_values_refuse_what_db_bench_refuses() {
        assert_eq!(parse_set_value(b"17", "Get").unwrap(), 17);
        for bad in [&b"0"[..], b"18446744073709551615", b"x", b""] {
            assert!(parse_set_value(bad, "Get").unwrap_err().to_string().contains("unexpected value"));
        }
    }

    #[test]
    fn a_shuffle_keeps_every_set() {
        let mut rng = Rng64::new(3);
        let mut sets: Vec<u16> = (0..10).collect();
        shuffle(&mut sets, &mut rng);
        let mut sorted = sets.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
}
