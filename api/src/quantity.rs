//! A Kubernetes resource quantity as written (`"500m"`, `"4Gi"`, `1000`).

use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The quantity grammar of `k8s.io/apimachinery`'s `resource.Quantity`, as Karpenter's CRDs
/// check it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A resource quantity kept as the text the user wrote; the manifest translation parses it
/// into the core's units. On the wire it is an int-or-string: YAML `cpu: 1000` and the API
/// server's JSON number `1000` read as `"1000"`, as Kubernetes reads them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity(pub String);

impl Quantity {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(text: &str) -> Self {
        Quantity(text.to_string())
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity such as 500m, 2, 512Mi or 4Gi")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }
        deserializer.deserialize_any(QuantityVisitor)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_strings_alike() {
        let from_json: Vec<Quantity> = serde_json::from_str(r#"[1000, "500m", 1.5]"#).unwrap();
        assert_eq!(from_json, vec!["1000".into(), "500m".into(), "1.5".into()]);
        let from_yaml: Vec<Quantity> = serde_saphyr::from_str("[1000, 4Gi]").unwrap();
        assert_eq!(from_yaml, vec!["1000".into(), "4Gi".into()]);
        assert_eq!(
            serde_json::to_string(&Quantity::from("2")).unwrap(),
            r#""2""#
        );
    }
}
