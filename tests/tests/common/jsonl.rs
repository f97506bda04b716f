//! An in-memory JSON Lines journal sink the test reads back: what a `--journal` file holds,
//! including the `reset` lines the journal in memory does not keep.

use std::io::Write;
use std::sync::{Arc, Mutex};

use kmock::Entry;

/// A `Write` sink for [`kmock::ClusterBuilder::journal_jsonl`]; clones share the bytes.
#[derive(Clone, Default)]
pub struct JsonlBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for JsonlBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl JsonlBuffer {
    /// Every entry written so far, in completion order.
    ///
    /// # Panics
    /// When a line is not a journal entry (kmock wrote something `read_jsonl` cannot read).
    pub fn entries(&self) -> Vec<Entry> {
        kmock::journal::read_jsonl(&self.0.lock().unwrap()[..]).expect("the sink holds JSON Lines")
    }

    /// The bytes written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("JSON Lines are UTF-8")
    }
}
