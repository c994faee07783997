//! Waiting on events instead of sleeping: a value that threads change and
//! announce ([`Watched`]), and a gate that holds callers until the test
//! opens it and tells the test who waits there ([`Gate`]). Every wait has a
//! watchdog ([`STUCK`]): a wait that
//! never ends fails naming what it waited for instead of hanging; it is no
//! speed limit.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long a test waits for something that must happen before calling it
/// stuck (a watchdog: what is awaited takes milliseconds).
pub const STUCK: Duration = Duration::from_secs(60);

/// A value threads change through [`Watched::update`], which wakes every
/// thread waiting for a condition on it.
#[derive(Default)]
pub struct Watched<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T> Watched<T> {
    pub fn new(value: T) -> Self {
        Watched { value: Mutex::new(value), changed: Condvar::new() }
    }

    /// Changes the value with `f` and wakes the waiters.
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let r = f(&mut self.value.lock());
        self.changed.notify_all();
        r
    }

    /// Reads the value with `f`.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.value.lock())
    }

    /// Waits until `done` holds of the value, looked at now and after every
    /// update; false if it does not within `timeout`.
    pub fn wait_for(&self, timeout: Duration, mut done: impl FnMut(&T) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut value = self.value.lock();
        while !done(&value) {
            if self.changed.wait_until(&mut value, deadline).timed_out() {
                return done(&value);
            }
        }
        true
    }

    /// Waits until `done` holds of the value; fails the test naming `what`
    /// after [`STUCK`].
    pub fn wait_until(&self, what: &str, done: impl FnMut(&T) -> bool) {
        assert!(self.wait_for(STUCK, done), "stuck waiting for {what}");
    }
}

/// Callers of [`Gate::pass`] wait while the gate is closed; the test knows
/// how many wait there.
#[derive(Default)]
pub struct Gate {
    state: Watched<GateState>,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    waiting: usize,
}

impl Gate {
    /// A gate that holds its callers until opened.
    pub fn closed() -> Gate {
        let gate = Gate::default();
        gate.close();
        gate
    }

    /// Waits while the gate is closed, then goes through.
    pub fn pass(&self) {
        let mut st = self.state.value.lock();
        if st.closed {
            st.waiting += 1;
            self.state.changed.notify_all();
            while st.closed {
                self.state.changed.wait(&mut st);
            }
            st.waiting -= 1;
        }
    }

    pub fn close(&self) {
        self.state.update(|st| st.closed = true);
    }

    pub fn open(&self) {
        self.state.update(|st| st.closed = false);
    }

    /// Waits until `n` callers wait at the gate (`what` names them).
    pub fn wait_for_waiting(&self, n: usize, what: &str) {
        self.state.wait_until(what, |st| st.waiting >= n);
    }
}
