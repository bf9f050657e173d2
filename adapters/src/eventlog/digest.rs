//! The decision digest: SHA-256 over the postcard encoding of every command, in order. Two runs
//! that decided the same things, byte for byte, have the same digest.

use nodewright_core::Command;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Default)]
pub struct DecisionDigest {
    hasher: Sha256,
    commands: u64,
}

impl DecisionDigest {
    pub fn new() -> Self {
        DecisionDigest::default()
    }

    pub fn add(&mut self, command: &Command) {
        // Encoding a core command into a Vec cannot fail: every type in it is serde-derived
        // with no custom serializer that errors.
        let bytes = postcard::to_stdvec(command).unwrap_or_default();
        self.add_encoded(&bytes);
    }

    /// Adds one command by its postcard encoding (what [`DecisionDigest::add`] encodes).
    pub fn add_encoded(&mut self, bytes: &[u8]) {
        self.hasher.update((bytes.len() as u64).to_le_bytes());
        self.hasher.update(bytes);
        self.commands += 1;
    }

    pub fn add_all<'a>(&mut self, commands: impl IntoIterator<Item = &'a Command>) {
        for c in commands {
            self.add(c);
        }
    }

    pub fn commands(&self) -> u64 {
        self.commands
    }

    /// Lowercase hex.
    pub fn hex(&self) -> String {
        self.hasher
            .clone()
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
