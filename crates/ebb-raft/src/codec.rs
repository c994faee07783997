//! How values and keys are stored (docs/cluster.md, "Storage layout").
//!
//! Every value this crate writes starts with [`FORMAT_VERSION`]; records
//! (log entries, votes, log ids, memberships, snapshot metadata) follow it
//! in postcard's encoding, application values follow it as they are.
//! Decoding never panics: an empty value, another version byte, bytes
//! postcard refuses, or bytes left over are a [`CodecError`], which the
//! stores turn into openraft's `StorageError`.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// DO NOT CHANGE: on-disk format. The first byte of every stored value.
/// A new layout takes a new number; a reader refuses numbers it does not know.
pub(crate) const FORMAT_VERSION: u8 = 1;

/// What is wrong with a stored value or key.
#[derive(Debug)]
pub(crate) enum CodecError {
    /// The value has no bytes, not even the version byte.
    Empty,
    /// The value starts with a version byte this build does not know.
    UnknownVersion(u8),
    /// postcard could not encode or decode the record.
    Postcard(postcard::Error),
    /// The record decoded, and this many bytes were left after it.
    TrailingBytes(usize),
    /// A log key that is not 8 bytes long.
    LogKeyLength(usize),
    /// The value does not agree with where it is stored or with itself.
    Inconsistent(String),
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecError::Empty => f.write_str("stored value is empty (no format version byte)"),
            CodecError::UnknownVersion(v) => {
                write!(f, "stored value has format version {v}; this build reads version {FORMAT_VERSION}")
            }
            CodecError::Postcard(e) => write!(f, "stored value does not decode: {e}"),
            CodecError::TrailingBytes(n) => write!(f, "stored value has {n} bytes after its record"),
            CodecError::LogKeyLength(n) => write!(f, "log key of {n} bytes (log keys are 8)"),
            CodecError::Inconsistent(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for CodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodecError::Postcard(e) => Some(e),
            _ => None,
        }
    }
}

impl From<postcard::Error> for CodecError {
    fn from(e: postcard::Error) -> Self {
        CodecError::Postcard(e)
    }
}

/// The version byte, then `record` in postcard's encoding.
pub(crate) fn encode<T: Serialize + ?Sized>(record: &T) -> Result<Vec<u8>, CodecError> {
    Ok(postcard::to_extend(record, vec![FORMAT_VERSION])?)
}

/// The record `encode` wrote into `value`.
pub(crate) fn decode<T: DeserializeOwned>(value: &[u8]) -> Result<T, CodecError> {
    let body = strip_version(value)?;
    let (record, rest) = postcard::take_from_bytes(body)?;
    if !rest.is_empty() {
        return Err(CodecError::TrailingBytes(rest.len()));
    }
    Ok(record)
}

/// An application value as stored: the version byte, then the bytes.
pub(crate) fn encode_raw(bytes: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + bytes.len());
    value.push(FORMAT_VERSION);
    value.extend_from_slice(bytes);
    value
}

/// The bytes after a known version byte.
pub(crate) fn strip_version(value: &[u8]) -> Result<&[u8], CodecError> {
    match value.split_first() {
        None => Err(CodecError::Empty),
        Some((&FORMAT_VERSION, body)) => Ok(body),
        Some((&other, _)) => Err(CodecError::UnknownVersion(other)),
    }
}

/// DO NOT CHANGE: on-disk format. The key of log entry `index`: its
/// big-endian bytes, so that keys sort as indexes do.
pub(crate) fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// DO NOT CHANGE: on-disk format. Sorts after every log key (a longer key
/// whose first 8 bytes are the largest sorts after all 8-byte keys): the
/// exclusive end of a range deletion that reaches the end of the log.
pub(crate) const LOG_KEYS_END: [u8; 9] = [0xff; 9];

/// The index a log key names.
pub(crate) fn log_index(key: &[u8]) -> Result<u64, CodecError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| CodecError::LogKeyLength(key.len()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The smallest key after `key` in bytewise order: `key` and a zero byte.
pub(crate) fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_behind_the_version_byte() {
        let value = encode(&(7u64, String::from("x"))).unwrap();
        assert_eq!(value[0], FORMAT_VERSION);
        assert_eq!(decode::<(u64, String)>(&value).unwrap(), (7, "x".into()));
    }

    #[test]
    fn damaged_values_are_errors() {
        let value = encode(&(7u64, String::from("x"))).unwrap();
        assert!(matches!(decode::<(u64, String)>(&[]), Err(CodecError::Empty)));
        let mut other = value.clone();
        other[0] = 2;
        assert!(matches!(decode::<(u64, String)>(&other), Err(CodecError::UnknownVersion(2))));
        assert!(matches!(decode::<(u64, String)>(&value[..value.len() - 1]), Err(CodecError::Postcard(_))));
        let mut longer = value.clone();
        longer.push(0);
        assert!(matches!(decode::<(u64, String)>(&longer), Err(CodecError::TrailingBytes(1))));
    }

    #[test]
    fn log_keys_sort_as_indexes_and_below_the_end() {
        let indexes = [0u64, 1, 255, 256, 1 << 40, u64::MAX];
        for pair in indexes.windows(2) {
            assert!(log_key(pair[0]) < log_key(pair[1]));
        }
        assert!(log_key(u64::MAX).as_slice() < LOG_KEYS_END.as_slice());
        assert_eq!(log_index(&log_key(1 << 40)).unwrap(), 1 << 40);
        assert!(matches!(log_index(b"short"), Err(CodecError::LogKeyLength(5))));
    }
}
