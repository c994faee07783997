//! A linearizability checker for the history of one register (one key),
//! after Wing and Gong ("Testing and verifying concurrent objects", 1993)
//! with Lowe's memoisation of the states already tried ("Testing for
//! linearizability", 2017). Linearizability is local (Herlihy and Wing
//! 1990, §3.3), so a history of several keys is checked key by key.
//!
//! The model: a register holding a value or nothing, initially nothing.
//! A put stores its value and answers the previous one; a get answers the
//! value. A put whose answer never came (an error, a timeout) may have
//! taken effect at any point after its call, or never: it stays pending to
//! the end of the history with an unknown answer. A failed get changed
//! nothing and is left out of the history.

use std::collections::HashSet;

/// What an operation asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    Put(u64),
    Get,
}

/// One operation of a history. Times are from one clock; `a` precedes `b`
/// in real time when `a.returned < b.invoked`.
#[derive(Clone, Debug)]
pub struct Op {
    pub input: Input,
    /// The value answered (the previous value for a put), `None` if no
    /// answer came.
    pub output: Option<Option<u64>>,
    pub invoked: u64,
    /// `u64::MAX` if no answer came.
    pub returned: u64,
}

impl Op {
    pub fn put(value: u64, previous: Option<u64>, invoked: u64, returned: u64) -> Op {
        Op { input: Input::Put(value), output: Some(previous), invoked, returned }
    }

    /// A put whose answer never came.
    pub fn put_unknown(value: u64, invoked: u64) -> Op {
        Op { input: Input::Put(value), output: None, invoked, returned: u64::MAX }
    }

    pub fn get(value: Option<u64>, invoked: u64, returned: u64) -> Op {
        Op { input: Input::Get, output: Some(value), invoked, returned }
    }
}

/// The most operations one history may hold (the set of operations
/// linearized so far is a 128-bit mask).
const MAX_OPS: usize = 128;

/// Bounds the search, so that a pathological history fails instead of
/// running for ever.
const MAX_STEPS: u64 = 5_000_000;

/// `Ok` if some order of `ops` respects real time and the register's
/// model; why not otherwise.
pub fn check(ops: &[Op]) -> Result<(), String> {
    let ops = &without_unseen_unknown_puts(ops);
    if ops.len() > MAX_OPS {
        return Err(format!("{} operations, at most {MAX_OPS} per history", ops.len()));
    }
    let mut search = Search { ops, seen: HashSet::new(), steps: 0 };
    let must = ops.iter().enumerate().filter(|(_, op)| op.output.is_some()).fold(0u128, |m, (i, _)| m | 1 << i);
    match search.run(0, None, must) {
        Some(true) => Ok(()),
        Some(false) => Err(format!("not linearizable: {ops:?}")),
        None => Err(format!("gave up after {MAX_STEPS} steps")),
    }
}

/// `ops` without the puts that got no answer and whose value no answered
/// operation saw (no get returned it, no put answered it as the previous
/// value): the same verdict, with far fewer orders to try. Such a put,
/// where it took effect, could only have been followed on its key by puts
/// without an answer, which overwrite it unseen, so leaving it out changes
/// no state an answered operation sees; and it may never have taken effect.
fn without_unseen_unknown_puts(ops: &[Op]) -> Vec<Op> {
    let seen: HashSet<u64> = ops.iter().filter_map(|op| op.output.flatten()).collect();
    ops.iter()
        .filter(|op| !matches!((op.input, op.output), (Input::Put(value), None) if !seen.contains(&value)))
        .cloned()
        .collect()
}

struct Search<'a> {
    ops: &'a [Op],
    /// (operations linearized, register value) already found to lead nowhere.
    seen: HashSet<(u128, Option<u64>)>,
    steps: u64,
}

impl Search<'_> {
    /// Whether the operations not in `done` can follow, from `state`, so
    /// that every one in `must` (those that answered) is placed; `None`
    /// when out of steps.
    fn run(&mut self, done: u128, state: Option<u64>, must: u128) -> Option<bool> {
        if done & must == must {
            return Some(true);
        }
        if !self.seen.insert((done, state)) {
            return Some(false);
        }
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return None;
        }
        let pending = || self.ops.iter().enumerate().filter(move |(i, _)| done & (1 << i) == 0);
        // An operation can come next only if no pending one returned
        // before it was called.
        let horizon = pending().map(|(_, op)| op.returned).min().unwrap_or(u64::MAX);
        let candidates: Vec<usize> = pending().filter(|(_, op)| op.invoked <= horizon).map(|(i, _)| i).collect();
        for i in candidates {
            let op = &self.ops[i];
            let next = match (op.input, op.output) {
                (Input::Put(value), None) => Some(value),
                (Input::Put(value), Some(previous)) if previous == state => Some(value),
                (Input::Get, Some(value)) if value == state => state,
                _ => continue,
            };
            if self.run(done | 1 << i, next, must)? {
                return Some(true);
            }
        }
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_history_that_follows_the_model_is_linearizable() {
        let ops = [Op::put(1, None, 0, 1), Op::get(Some(1), 2, 3), Op::put(2, Some(1), 4, 5), Op::get(Some(2), 6, 7)];
        assert_eq!(check(&ops), Ok(()));
    }

    #[test]
    fn a_stale_read_is_rejected() {
        let ops = [Op::put(1, None, 0, 1), Op::put(2, Some(1), 2, 3), Op::get(Some(1), 4, 5)];
        assert!(check(&ops).is_err());
    }

    #[test]
    fn a_read_that_goes_back_in_time_is_rejected() {
        // The put overlaps both reads, so either read alone is fine; the
        // second cannot see the register before the put once the first
        // saw it after.
        let ops = [Op::put(1, None, 0, 10), Op::get(Some(1), 1, 2), Op::get(None, 3, 4)];
        assert!(check(&ops).is_err());
        assert_eq!(check(&ops[..2]), Ok(()));
        assert_eq!(check(&[ops[0].clone(), ops[2].clone()]), Ok(()));
    }

    #[test]
    fn a_wrong_previous_value_is_rejected() {
        let ops = [Op::put(1, None, 0, 1), Op::put(2, None, 2, 3)];
        assert!(check(&ops).is_err());
    }

    #[test]
    fn concurrent_puts_may_take_effect_in_either_order() {
        let ops = [Op::put(1, Some(2), 0, 10), Op::put(2, None, 1, 9), Op::get(Some(1), 11, 12)];
        assert_eq!(check(&ops), Ok(()));
    }

    #[test]
    fn a_put_without_an_answer_may_take_effect_late_or_never() {
        let late = [Op::put_unknown(1, 0), Op::get(None, 1, 2), Op::get(Some(1), 3, 4)];
        assert_eq!(check(&late), Ok(()));
        let never = [Op::put_unknown(1, 0), Op::put(2, None, 1, 2), Op::get(Some(2), 3, 4)];
        assert_eq!(check(&never), Ok(()));
        // But once seen it stays: it took effect once.
        let flicker = [Op::put_unknown(1, 0), Op::get(Some(1), 1, 2), Op::get(None, 3, 4)];
        assert!(check(&flicker).is_err());
    }

    #[test]
    fn many_puts_without_an_answer_are_checked_quickly() {
        // Forty puts never answered, interleaved with answered ones that
        // see only their own values: without leaving out the unseen ones
        // the search gives up (2^40 orders); with it, the verdict is found,
        // both ways.
        let mut ops = Vec::new();
        let mut time = 0;
        for i in 0..40u64 {
            ops.push(Op::put_unknown(1000 + i, time));
            ops.push(Op::put(i + 1, if i == 0 { None } else { Some(i) }, time + 1, time + 2));
            time += 3;
        }
        assert_eq!(check(&ops), Ok(()));
        // One answered put that saw a value no put wrote: rejected.
        ops.push(Op::put(99, Some(7), time, time + 1));
        assert!(check(&ops).unwrap_err().starts_with("not linearizable"));
        // An unknown put that was seen stays in: it took effect, after the
        // last answered put (which saw 39, not it)...
        ops.pop();
        ops.push(Op::get(Some(1039), time, time + 1));
        assert_eq!(check(&ops), Ok(()));
        // ...so the register cannot go back to 40 after it was seen.
        ops.push(Op::get(Some(40), time + 2, time + 3));
        assert!(check(&ops).unwrap_err().starts_with("not linearizable"));
    }
}
