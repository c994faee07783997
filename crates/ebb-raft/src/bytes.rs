//! Byte strings in two serde forms, chosen by the format: compact binary
//! formats (postcard, the stored format) get the bytes themselves, a
//! length and the bytes, exactly as a `Vec<u8>` has always been stored;
//! human-readable formats (JSON, the server's Raft messages) get a string
//! of standard base64 with padding, where a `Vec<u8>` would otherwise be an
//! array of numbers, three to four times the bytes.
//!
//! Use as `#[serde(with = "ebb_raft::bytes")]` on a `Vec<u8>` field.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// `bytes` as base64 text for a human-readable format, as bytes otherwise.
pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    if serializer.is_human_readable() {
        serializer.serialize_str(&STANDARD.encode(bytes))
    } else {
        serializer.serialize_bytes(bytes)
    }
}

/// The bytes [`serialize`] wrote. Human-readable formats also accept an
/// array of numbers, the form before base64.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    if deserializer.is_human_readable() {
        deserializer.deserialize_any(BytesVisitor)
    } else {
        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bytes, or a string of base64")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Vec<u8>, E> {
        STANDARD.decode(text).map_err(|e| E::custom(format!("bytes in base64: {e}")))
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Wrapped(#[serde(with = "super")] Vec<u8>);

    #[test]
    fn json_gets_base64_and_postcard_the_bytes_as_a_vec_has_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        let json = serde_json::to_string(&Wrapped(bytes.clone())).unwrap();
        assert!(json.starts_with("\"AAECAw") && json.len() < 400, "{json}");
        assert_eq!(serde_json::from_str::<Wrapped>(&json).unwrap(), Wrapped(bytes.clone()));
        // The earlier JSON form, an array of numbers, still reads.
        let array = serde_json::to_string(&bytes).unwrap();
        assert_eq!(serde_json::from_str::<Wrapped>(&array).unwrap(), Wrapped(bytes.clone()));
        // postcard: the same bytes as a plain Vec<u8>, both ways.
        let compact = postcard::to_allocvec(&Wrapped(bytes.clone())).unwrap();
        assert_eq!(compact, postcard::to_allocvec(&bytes).unwrap());
        assert_eq!(postcard::from_bytes::<Wrapped>(&compact).unwrap(), Wrapped(bytes));
        assert!(serde_json::from_str::<Wrapped>("\"not base64!\"").is_err());
    }
}
