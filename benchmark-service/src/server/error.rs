//! [`BenchError`]: why the benchmark server could not start or run — the one error type of
//! [`server`](super), shared by starting in-process, serving, and reading a child's output.

use brisk::RpcError;

use crate::store::StoreError;

/// Why the benchmark server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An invalid setting (flag or config file; the message names the key), or the server could
    /// not bind its address.
    #[error("{0}")]
    Rpc(#[from] RpcError),

    /// The message file or the database could not be opened.
    #[error("cannot open the benchmark data: {0}")]
    Store(#[from] StoreError),

    /// An operating-system level failure outside brisk (creating the runtime, reading the child's
    /// output).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A spawned server process ended before it printed its `LISTENING` line.
    #[error("the benchmark server process exited before it started listening (see its error output above){}", last_output_hint(.last_output))]
    ChildExited {
        /// The last lines the child printed on stdout, if any.
        last_output: Vec<String>,
    },
}

fn last_output_hint(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its last output: {}", lines.join(" | "))
    }
}
