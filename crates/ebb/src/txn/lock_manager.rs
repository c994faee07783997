//! The pessimistic transaction database's per-key locks.
