//! A value derived from the rest of its owner, computed the first time it is read and kept.

use std::sync::OnceLock;

/// A value computed from its owner's other fields the first time it is read, then kept for
/// every reader of the owner (an owner shared behind an `Arc` computes it once for all).
///
/// It is no part of its owner's identity: two owners are equal, hash alike and serialize
/// alike whatever their derived values hold, and a clone starts without it (the clone may be
/// changed before it is read). Whoever changes what it is derived from after it was read puts
/// a fresh one in its place (as a node's state does when its node or its pods change).
pub struct Derived<T>(OnceLock<T>);

impl<T> Derived<T> {
    /// The value, computed by `derive` the first time.
    pub fn get_or_init(&self, derive: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(derive)
    }
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived(OnceLock::new())
    }
}

impl<T> Clone for Derived<T> {
    fn clone(&self) -> Self {
        Derived::default()
    }
}

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Derived<T> {}

impl<T> std::hash::Hash for Derived<T> {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl<T> std::fmt::Debug for Derived<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Derived(computed)"
        } else {
            "Derived(not yet)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_once_and_never_part_of_identity() {
        let computed = Derived::default();
        let mut calls = 0;
        assert_eq!(
            *computed.get_or_init(|| {
                calls += 1;
                7
            }),
            7
        );
        assert_eq!(
            *computed.get_or_init(|| {
                calls += 1;
                8
            }),
            7
        );
        assert_eq!(calls, 1);
        let fresh: Derived<i32> = Derived::default();
        assert_eq!(computed, fresh);
        // A clone computes again: its owner may have changed in between.
        assert_eq!(*computed.clone().get_or_init(|| 9), 9);
    }
}
