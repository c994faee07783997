//! The client's error type: a message that names what was wrong (a flag, a
//! file and line, an engine call), printed by `main` before exiting with code 1.

use std::fmt;

/// An error with a message meant for the person running the benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(String);

/// The client's result type.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> BenchError {
        BenchError(msg.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// Prefixes the message with `context: `.
    pub fn context(self, context: impl fmt::Display) -> BenchError {
        BenchError(format!("{context}: {}", self.0))
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<ebb::Error> for BenchError {
    fn from(e: ebb::Error) -> Self {
        BenchError(format!("ebb: {e}"))
    }
}

/// Returns early with a [`BenchError`] built from a format string.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::BenchError::new(format!($($arg)*)))
    };
}
