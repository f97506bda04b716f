//! The live journal: every completed entry's JSON line, fanned out to `GET /journal/stream`.
//!
//! It is a journal sink ([`crate::ClusterBuilder::journal_jsonl`]): the journal writes each
//! entry once complete, as one line, and this writer hands the line to every subscriber (and
//! on to a file, for `--journal`). Lines come in completion order, as in the file.

use std::io::Write;
use std::sync::Arc;

use tokio::sync::broadcast;

/// Lines a subscriber may fall behind by before its stream is closed (with a line saying so).
const BACKLOG: usize = 16 * 1024;

/// The live feed of completed journal entries. Cheap to clone; every clone is the same feed.
#[derive(Debug, Clone)]
pub struct LiveJournal {
    lines: broadcast::Sender<Arc<str>>,
}

impl Default for LiveJournal {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveJournal {
    /// A feed with no subscribers.
    pub fn new() -> Self {
        Self {
            lines: broadcast::channel(BACKLOG).0,
        }
    }

    /// The journal sink to build the cluster with: it feeds subscribers, and writes every
    /// line on to `file` too when given (the `--journal` file).
    pub fn sink(&self, file: Option<Box<dyn Write + Send>>) -> impl Write + Send + 'static {
        Tee {
            lines: self.lines.clone(),
            file,
            pending: Vec::new(),
        }
    }

    /// Lines completed from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.lines.subscribe()
    }
}

/// Writes to the file (if any) and broadcasts each whole line, without its newline.
struct Tee {
    lines: broadcast::Sender<Arc<str>>,
    file: Option<Box<dyn Write + Send>>,
    /// Bytes of a line not yet ended.
    pending: Vec<u8>,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.file {
            Some(file) => file.write(buf)?,
            None => buf.len(),
        };
        self.pending.extend_from_slice(&buf[..n]);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            // No subscriber, no copy: a send without receivers would only be refused.
            if self.lines.receiver_count() > 0 {
                let _ = self
                    .lines
                    .send(String::from_utf8_lossy(&line[..end]).into());
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_lines_reach_subscribers_and_the_file() {
        let live = LiveJournal::new();
        let mut rx = live.subscribe();
        let file = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = live.sink(Some(Box::new(Shared(file.clone()))));
        sink.write_all(b"{\"seq\":1}\n{\"se").unwrap();
        assert_eq!(&*rx.try_recv().unwrap(), "{\"seq\":1}");
        assert!(rx.try_recv().is_err(), "half a line is not sent");
        sink.write_all(b"q\":2}\n").unwrap();
        assert_eq!(&*rx.try_recv().unwrap(), "{\"seq\":2}");
        assert_eq!(&*file.lock().unwrap(), b"{\"seq\":1}\n{\"seq\":2}\n");
    }
}
