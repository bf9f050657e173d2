//! A name held once and shared by every copy: an instance type's or a zone's name in a launch's
//! options (hundreds of them per NodeClaim, copied from the catalog's names).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A shared, immutable name. Reads as a `&str`; serialized as a plain string, so a log or a
/// snapshot holds the same bytes as a `String` would.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedName(Arc<str>);

impl SharedName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SharedName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SharedName {
    fn from(name: &str) -> Self {
        SharedName(Arc::from(name))
    }
}

impl From<String> for SharedName {
    fn from(name: String) -> Self {
        SharedName(Arc::from(name))
    }
}

impl From<&String> for SharedName {
    fn from(name: &String) -> Self {
        SharedName(Arc::from(name.as_str()))
    }
}

impl PartialEq<str> for SharedName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedName> for String {
    fn eq(&self, other: &SharedName) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedName> for str {
    fn eq(&self, other: &SharedName) -> bool {
        *self == *other.0
    }
}

impl PartialEq<SharedName> for &str {
    fn eq(&self, other: &SharedName) -> bool {
        **self == *other.0
    }
}

impl fmt::Display for SharedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SharedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for SharedName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(SharedName::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_name_encodes_as_the_string_it_holds() {
        let name = SharedName::from("m5.large");
        assert_eq!(
            postcard::to_stdvec(&name).unwrap(),
            postcard::to_stdvec(&"m5.large".to_string()).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&name).unwrap(),
            serde_json::to_string("m5.large").unwrap()
        );
        let back: SharedName = postcard::from_bytes(&postcard::to_stdvec(&name).unwrap()).unwrap();
        assert_eq!(back, name);
        assert_eq!(back, "m5.large");
        assert_eq!(format!("{name} {name:?}"), "m5.large \"m5.large\"");
    }

    #[test]
    fn copies_share_one_name() {
        let name = SharedName::from("us-east-1a".to_string());
        let copy = name.clone();
        assert!(std::ptr::eq(name.as_str(), copy.as_str()));
    }
}
