//! Kill points: named places where the crash tests (tests/kill_points.rs)
//! stop the engine, with an injected error or with a panic standing for a
//! killed process (RocksDB's `TEST_KILL_RANDOM`, here with the `fail` crate).
//! They exist only with the `failpoints` feature; without it every
//! `kill_point!` compiles to nothing (a point's condition is type-checked,
//! never evaluated).
//!
//! - `kill_point!("name")` returns an injected I/O error from the enclosing
//!   function when the point is configured to `return`;
//! - `kill_point!("name", if cond)` does so only where `cond` holds;
//! - `kill_point!("name" => value)` returns `value` instead, for functions
//!   that return no `Result`.
//!
//! Every configured action of the `fail` crate works at every point (`panic`,
//! `sleep`, a callback); the points and where they sit are listed in
//! docs/reliability.md.

#[cfg(feature = "failpoints")]
macro_rules! kill_point {
    ($name:literal) => {
        fail::fail_point!($name, |_| Err($crate::kill_points::injected($name)))
    };
    ($name:literal, if $cond:expr) => {
        fail::fail_point!($name, $cond, |_| Err($crate::kill_points::injected($name)))
    };
    ($name:literal => $ret:expr) => {
        fail::fail_point!($name, |_| $ret)
    };
}

#[cfg(not(feature = "failpoints"))]
macro_rules! kill_point {
    // A closure never called: what the condition reads counts as read in
    // every build, and nothing runs.
    ($name:literal, if $cond:expr) => {
        let _ = || $cond;
    };
    ($($anything:tt)*) => {};
}

/// The error a kill point configured to `return` returns.
#[cfg(feature = "failpoints")]
pub(crate) fn injected(name: &'static str) -> crate::error::Error {
    crate::error::Error::io("kill point", name, std::io::Error::other(format!("injected at kill point {name}")))
}
