//! A gate the pool tests' fake sandbox passes in `freeze` (tests_freeze.rs arms it).

use std::sync::{Condvar, Mutex};

/// Lets a test stop the fake sandbox inside `freeze` (as a real freeze waits for the
/// instance's tasks to stop) and act while it is there.
#[derive(Default)]
pub(super) struct FreezeGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    armed: bool,
    entered: bool,
}

impl FreezeGate {
    /// Called by the fake's freeze: waits while the gate is armed.
    pub(super) fn pass(&self) {
        let mut s = self.state.lock().unwrap();
        if !s.armed {
            return;
        }
        s.entered = true;
        self.changed.notify_all();
        while s.armed {
            s = self.changed.wait(s).unwrap();
        }
    }

    pub(super) fn arm(&self) {
        self.state.lock().unwrap().armed = true;
    }

    pub(super) fn entered(&self) -> bool {
        self.state.lock().unwrap().entered
    }

    pub(super) fn open(&self) {
        self.state.lock().unwrap().armed = false;
        self.changed.notify_all();
    }
}
