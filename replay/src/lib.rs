//! # nodewright-replay
//!
//! Reading nodewright event logs and re-running the core over them: `replay --verify` (the
//! same events must give the same commands, byte for byte) and `log inspect`. What-if replay
//! and `explain` build on the same reading.
//!
//! It depends on the core and on the log format of the adapters crate, never on a runtime or a
//! cloud SDK, so an incident log replays on any laptop.

pub mod explain;
pub mod export;
pub mod inspect;
pub mod redact;
pub mod repair;
pub mod replayer;
pub mod segments;
pub mod verify;

pub use explain::{Story, Subject, explain_file};
pub use inspect::{LogSummary, inspect_file};
pub use replayer::{Replayer, Step};
pub use verify::{
    Divergence, Progress, ReplayError, VerifyOutcome, verify, verify_file, verify_file_in_parts,
    verify_file_with_progress,
};
